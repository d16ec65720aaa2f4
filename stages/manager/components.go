package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// components are the routes of Asperathos' monitor, controller and
// visualizer that tools driving one of them directly call, mapped onto
// Pace's stages (docs/asperathos.md, "Routes: what differs and why").
//
// Pace monitors, controls and shows a job from its submission to its end,
// on its own: starting one of them for a job answers as Asperathos did once
// it had started, when the job is the caller's and still runs, and says so
// (409) when the job's settings ask for something else than what runs.
// Stopping the monitor or the controller is done once the job has ended
// (204); before, it is a 409 naming the job's own stop, as Pace cannot run
// a job without them. Every route needs credentials and acts on the
// caller's jobs only, as the job routes do.
func (a *API) components() []route {
	m := a.m
	return []route{
		{method: "POST", path: "/monitoring/{id}", summary: "Start monitoring a job, as Asperathos' monitor: Pace monitors every job from its start", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req struct {
					Plugin        string          `json:"plugin"`
					PluginInfo    json.RawMessage `json:"plugin_info"`
					CollectPeriod any             `json:"collect_period"`
				}
				if err := a.componentBody(r, &req, func() map[string]bool {
					return map[string]bool{"plugin": req.Plugin != "", "plugin_info": present(req.PluginInfo)}
				}); err != nil {
					return nil, err
				}
				if !slices.Contains(asperathosMonitorPlugins, req.Plugin) {
					return nil, invalidAs("request", field.ErrorList{field.NotSupported(field.NewPath("plugin"), req.Plugin, asperathosMonitorPlugins)})
				}
				rec, err := a.running(r, u, "monitoring")
				if err != nil {
					return nil, err
				}
				if p := monitorPlugin(rec); p != req.Plugin {
					return nil, apiError(http.StatusConflict, "job %s is monitored by %s, set at its submission", rec.ID, p)
				}
				return map[string]any{}, nil
			}},
		{method: "PUT", path: "/monitoring/{id}/stop", summary: "Stop monitoring a job: done when it has ended", ok: http.StatusNoContent,
			handle: func(r *http.Request, u auth.User) (any, error) { return nil, a.ended(r, u, "monitoring") }},
		{method: "POST", path: "/setup", summary: "Asperathos' legacy instance cap: not implemented", ok: http.StatusNoContent, body: true,
			handle: func(*http.Request, auth.User) (any, error) {
				return nil, apiError(http.StatusNotImplemented, "Pace sets no instance cap at run time: a job's replicas.max (max_rep) and pace up --max-local-replicas bound its workers")
			}},
		{method: "POST", path: "/scaling/{id}", summary: "Start scaling a job, as Asperathos' controller: Pace controls every job from its start", ok: http.StatusNoContent, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req struct {
					ControlPlugin     string `json:"control_plugin"`
					ControlParameters *struct {
						ScheduleStrategy string `json:"schedule_strategy"`
					} `json:"control_parameters"`
				}
				if err := a.componentBody(r, &req, func() map[string]bool {
					return map[string]bool{"control_plugin": req.ControlPlugin != "", "control_parameters": req.ControlParameters != nil}
				}); err != nil {
					return nil, err
				}
				if !slices.Contains(asperathosControlPlugins, req.ControlPlugin) {
					return nil, invalidAs("request", field.ErrorList{field.NotSupported(field.NewPath("control_plugin"), req.ControlPlugin, asperathosControlPlugins)})
				}
				rec, err := a.running(r, u, "scaling")
				if err != nil {
					return nil, err
				}
				if want, got := req.ControlParameters.ScheduleStrategy, controllerOf(rec); want != "" && want != got {
					return nil, apiError(http.StatusConflict, "job %s is scaled by controller %s, set at its submission", rec.ID, got)
				}
				return nil, nil
			}},
		{method: "PUT", path: "/scaling/{id}/stop", summary: "Stop scaling a job: done when it has ended", ok: http.StatusNoContent,
			handle: func(r *http.Request, u auth.User) (any, error) { return nil, a.ended(r, u, "scaling") }},
		{method: "GET", path: "/scaling", summary: "The controller's status text, as Asperathos' controller answered it", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				jobs, err := m.Jobs(r.Context(), u)
				if err != nil {
					return nil, err
				}
				return a.scalingStatus(r.Context(), jobs)
			}},
		{method: "POST", path: "/visualizing/{id}", summary: "Start a job's dashboard, as Asperathos' visualizer: Pace's shows every job", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req visualizerRequest
				if err := a.componentBody(r, &req, func() map[string]bool {
					return req.required(map[string]bool{"enable_visualizer": req.EnableVisualizer != nil})
				}); err != nil {
					return nil, err
				}
				if err := req.check(); err != nil {
					return nil, err
				}
				_, err := a.running(r, u, "dashboard")
				return map[string]any{}, err
			}},
		{method: "POST", path: "/visualizing", summary: "Asperathos' documented form without an id: never served by its visualizer", ok: http.StatusAccepted, body: true,
			handle: func(*http.Request, auth.User) (any, error) {
				return nil, apiError(http.StatusBadRequest, "the job's id goes in the path: POST /visualizing/{app_id}, the route Asperathos' visualizer served")
			}},
		{method: "PUT", path: "/visualizing/{id}/stop", summary: "Stop a job's dashboard: Pace frees nothing, the page goes with the job", ok: http.StatusNoContent, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req visualizerRequest
				if err := a.componentBody(r, &req, func() map[string]bool { return req.required(map[string]bool{}) }); err != nil {
					return nil, err
				}
				if err := req.check(); err != nil {
					return nil, err
				}
				_, err := m.changer(r.Context(), u, jobID(r))
				return nil, err
			}},
		{method: "GET", path: "/visualizing/{id}", summary: "URL of the job's dashboard, as Asperathos' visualizer answered", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				rec, err := a.job(r.Context(), u, jobID(r))
				if err != nil {
					return nil, err
				}
				return map[string]string{"url": m.visualizerURL(rec)}, nil
			}},
	}
}

// visualizerRequest is the body of Asperathos' visualizer routes. The
// Grafana credentials and data source settings it may carry are not read:
// Pace's visualizer is its web UI.
type visualizerRequest struct {
	Plugin           string `json:"plugin"`
	EnableVisualizer *bool  `json:"enable_visualizer"`
	VisualizerPlugin string `json:"visualizer_plugin"`
	DatasourceType   string `json:"datasource_type"`
}

// required adds the fields both visualizer routes need to more.
func (v *visualizerRequest) required(more map[string]bool) map[string]bool {
	more["plugin"], more["visualizer_plugin"], more["datasource_type"] = v.Plugin != "", v.VisualizerPlugin != "", v.DatasourceType != ""
	return more
}

// check refuses plugins Pace does not serve, each with its field.
func (v *visualizerRequest) check() error {
	var errs field.ErrorList
	if !slices.Contains(asperathosMonitorPlugins, v.Plugin) {
		errs = append(errs, field.NotSupported(field.NewPath("plugin"), v.Plugin, asperathosMonitorPlugins))
	}
	if !slices.Contains(asperathosVisualizerPlugins, v.VisualizerPlugin) {
		errs = append(errs, field.NotSupported(field.NewPath("visualizer_plugin"), v.VisualizerPlugin, asperathosVisualizerPlugins))
	}
	if len(errs) > 0 {
		return invalidAs("request", errs)
	}
	return nil
}

// componentBody reads a component route's JSON body into v as Asperathos'
// services read theirs: fields v does not have are ignored (Asperathos'
// manager sent whole plugin_info documents), no body is {}. Then have,
// called after decoding, says which required fields were given: a 400
// names every invalid or missing one.
func (a *API) componentBody(r *http.Request, v any, have func() map[string]bool) error {
	data, _, err := a.readBody(r, false)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	data, _ = relaxDoc(data, reflect.TypeOf(v).Elem())
	errs, _ := decodeStrict(data, v, nil)
	given := have()
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if !given[k] {
			errs = append(errs, field.Required(field.NewPath(k), ""))
		}
	}
	if len(errs) > 0 {
		return invalidAs("request", errs)
	}
	return nil
}

// present reports whether a JSON value was given and is not null.
func present(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }

// running returns the request's job for starting one of its components:
// the caller's (credentials needed), and not ended.
func (a *API) running(r *http.Request, u auth.User, component string) (*schemas.JobRecord, error) {
	id := jobID(r)
	rec, err := a.m.changer(r.Context(), u, id)
	if err != nil {
		return nil, err
	}
	if rec.State.Final() {
		return nil, apiError(http.StatusConflict, "job %s is already %s: Pace ran its %s until it ended", id, rec.State, component)
	}
	return rec, nil
}

// ended checks that the request's job, the caller's, has ended, when Pace
// stopped its component: before, stopping the component alone is refused.
func (a *API) ended(r *http.Request, u auth.User, component string) error {
	id := jobID(r)
	rec, err := a.m.changer(r.Context(), u, id)
	if err != nil {
		return err
	}
	if !rec.State.Final() {
		return apiError(http.StatusConflict, "job %s is %s: Pace runs its %s until it ends; stop the job itself (PUT /submissions/%s/stop)",
			id, rec.State, component, id)
	}
	return nil
}

// scalingStatus is Asperathos' controller status text: each unfinished job
// of jobs and its controller's last decision.
func (a *API) scalingStatus(ctx context.Context, jobs []*schemas.JobRecord) (string, error) {
	var b strings.Builder
	b.WriteString("Status: OK\nMonitoring applications:\n")
	for _, rec := range jobs {
		if rec.State.Final() {
			continue
		}
		d, err := a.m.bus.Outputs().LastDecision(ctx, rec.ID)
		if err != nil {
			return "", err
		}
		action := "none yet"
		if d != nil {
			action = fmt.Sprintf("%s replicas %d -> %d (%s)", d.At.UTC().Format(time.RFC3339), d.Current, d.Replicas, d.Reason)
		}
		fmt.Fprintf(&b, "%s\nLast action:%s\n", rec.ID, action)
	}
	return b.String(), nil
}

// monitorPlugin is the Asperathos monitor plugin a job is monitored as:
// the one its submission named, else kubejobs_cost for a job with a cost.
func monitorPlugin(rec *schemas.JobRecord) string {
	if p := rec.Spec.Labels[labelMonitorPlugin]; p != "" {
		return p
	}
	if rec.Spec.Cost != nil {
		return "kubejobs_cost"
	}
	return "kubejobs"
}

// controllerOf is the controller plugin that scales a job.
func controllerOf(rec *schemas.JobRecord) string {
	if rec.Spec.Controller.Name == "" {
		return schemas.DefaultController
	}
	return rec.Spec.Controller.Name
}
