package manager

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/pace-platform/pace/auth"
	"github.com/pace-platform/pace/schemas"
)

// route is one operation of the HTTP API. The table drives both the mux
// and the OpenAPI document, so they cannot drift apart.
type route struct {
	method, path, summary string
	// ok is the success status; body says whether the request has one.
	ok   int
	body bool
	// stream routes write their own response and have no request timeout.
	stream bool
	handle func(r *http.Request, u auth.User) (any, error)
}

// API serves the manager's HTTP API. It expects the caller in the request
// context (auth.Middleware); without one the caller is anonymous.
type API struct {
	m      *Manager
	routes []route
}

// NewAPI returns the HTTP API of m.
func NewAPI(m *Manager) *API {
	a := &API{m: m}
	a.routes = a.table()
	return a
}

// Register adds every route of the API to mux. Like Asperathos, every
// route is also served with a ".json" suffix (e.g. /submissions.json).
func (a *API) Register(mux *http.ServeMux) {
	for _, rt := range a.routes {
		h := a.wrap(rt)
		mux.Handle(rt.method+" "+rt.path, h)
		if !strings.HasSuffix(rt.path, "}") { // /submissions/{id}.json arrives as id "….json"
			mux.Handle(rt.method+" "+rt.path+".json", h)
		}
	}
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.OpenAPI())
	})
}

// Handler returns the API alone on a new mux, for tests and embedding.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	a.Register(mux)
	return mux
}

func (a *API) table() []route {
	m := a.m
	return []route{
		{method: "POST", path: "/submissions", summary: "Submit a job (Pace spec as JSON or YAML, or Asperathos kubejobs JSON)", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				data, ct, err := a.readBody(r, true)
				if err != nil {
					return nil, err
				}
				rec, err := m.Submit(r.Context(), u, data, ct)
				if err != nil {
					return nil, err
				}
				return map[string]string{"job_id": rec.ID}, nil
			}},
		{method: "GET", path: "/submissions", summary: "List the caller's jobs, keyed by id", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				jobs, err := m.Jobs(r.Context(), u)
				if err != nil {
					return nil, err
				}
				out := make(map[string]any, len(jobs))
				for _, rec := range jobs {
					out[rec.ID] = m.view(r.Context(), rec, false)
				}
				return out, nil
			}},
		{method: "DELETE", path: "/submissions", summary: "Delete every finished job of the caller (409 lists the running ones kept)", ok: http.StatusNoContent, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, err := a.bodyUser(r, u)
				if err != nil {
					return nil, err
				}
				_, kept, err := m.DeleteFinished(r.Context(), u)
				if err == nil && len(kept) > 0 {
					err = apiError(http.StatusConflict, "finished jobs deleted; still running, not deleted: %s", strings.Join(kept, ", "))
				}
				return nil, err
			}},
		{method: "GET", path: "/submissions/{id}", summary: "Show a job (Asperathos view plus Pace's fields)", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				rec, err := m.Job(r.Context(), u, jobID(r))
				if err != nil {
					return nil, err
				}
				return m.view(r.Context(), rec, true), nil
			}},
		{method: "PUT", path: "/submissions/{id}/stop", summary: "Stop a job: no new items, items in flight finish", ok: http.StatusNoContent, body: true,
			handle: a.command(m.Stop)},
		{method: "PUT", path: "/submissions/{id}/terminate", summary: "Terminate a job at once and delete its workers", ok: http.StatusNoContent, body: true,
			handle: a.command(m.Terminate)},
		{method: "DELETE", path: "/submissions/{id}", summary: "Delete a finished job and its data (409 while it runs)", ok: http.StatusNoContent, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, err := a.bodyUser(r, u)
				if err != nil {
					return nil, err
				}
				return nil, m.Delete(r.Context(), u, jobID(r))
			}},
		{method: "GET", path: "/submissions/{id}/report", summary: "Detailed report: samples keyed by time", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				d, _, err := a.report(r, u)
				return d, err
			}},
		{method: "GET", path: "/submissions/{id}/report/summary", summary: "Summary report (Asperathos' fields plus Pace's)", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				_, s, err := a.report(r, u)
				return s, err
			}},
		{method: "GET", path: "/submissions/{id}/errors", summary: "Dead-lettered items of a job", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				rec, err := m.Job(r.Context(), u, jobID(r))
				if err != nil {
					return nil, err
				}
				dead, err := m.bus.StoredDeadLetters(r.Context(), rec.ID)
				if dead == nil {
					dead = []*schemas.DeadLetter{}
				}
				return dead, err
			}},
		{method: "GET", path: "/submissions/{id}/log", summary: "Log lines of a job; ?follow=true streams NDJSON until the job ends", ok: http.StatusOK, stream: true,
			handle: a.logs},
		{method: "GET", path: "/submissions/{id}/visualizer", summary: "URL of the job's dashboard", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				rec, err := m.Job(r.Context(), u, jobID(r))
				if err != nil {
					return nil, err
				}
				return map[string]string{"visualizer_url": m.visualizerURL(rec)}, nil
			}},
		{method: "POST", path: "/submissions/cluster", summary: "Register a cluster's kubeconfig (admins)", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req struct {
					Name   string `json:"cluster_name"`
					Config string `json:"cluster_config"`
					credentials
				}
				u, err := a.decode(r, u, &req)
				if err != nil {
					return nil, err
				}
				if req.Config == "" {
					return nil, apiError(http.StatusBadRequest, "cluster_config is required")
				}
				_, err = m.updateCluster(r.Context(), u, req.Name, true, func(c *Cluster) error { c.Config = req.Config; return nil })
				return map[string]string{"cluster_name": req.Name, "status": "success"}, err
			}},
		{method: "GET", path: "/submissions/cluster", summary: "List registered clusters (admins)", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) { return a.clusters(r, u, false) }},
		{method: "GET", path: "/submissions/cluster/activate", summary: "Show the active cluster (admins)", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) { return a.clusters(r, u, true) }},
		{method: "PUT", path: "/submissions/cluster/{name}/activate", summary: "Make a cluster the active one (admins)", ok: http.StatusOK, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, err := a.bodyUser(r, u)
				if err != nil {
					return nil, err
				}
				name := r.PathValue("name")
				return map[string]string{"cluster_name": name, "status": "active"}, m.activateCluster(r.Context(), u, name)
			}},
		{method: "DELETE", path: "/submissions/cluster/{name}", summary: "Delete a cluster (admins)", ok: http.StatusNoContent, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, err := a.bodyUser(r, u)
				if err != nil {
					return nil, err
				}
				return nil, m.deleteCluster(r.Context(), u, r.PathValue("name"))
			}},
		{method: "POST", path: "/submissions/cluster/{name}/certificate", summary: "Add a certificate to a cluster (admins)", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req struct {
					Name    string `json:"certificate_name"`
					Content string `json:"certificate_content"`
					credentials
				}
				u, err := a.decode(r, u, &req)
				if err != nil {
					return nil, err
				}
				if req.Name == "" {
					return nil, apiError(http.StatusBadRequest, "certificate_name is required")
				}
				name := r.PathValue("name")
				_, err = m.updateCluster(r.Context(), u, name, false, func(c *Cluster) error {
					if c.Certificates == nil {
						c.Certificates = map[string]string{}
					}
					c.Certificates[req.Name] = req.Content
					return nil
				})
				return map[string]string{"cluster_name": name, "certificate_name": req.Name, "status": "success"}, err
			}},
		{method: "DELETE", path: "/submissions/cluster/{name}/certificate/{cert}", summary: "Remove a certificate from a cluster (admins)", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, err := a.bodyUser(r, u)
				if err != nil {
					return nil, err
				}
				name, cert := r.PathValue("name"), r.PathValue("cert")
				_, err = m.updateCluster(r.Context(), u, name, false, func(c *Cluster) error {
					if _, ok := c.Certificates[cert]; !ok {
						return apiError(http.StatusNotFound, "cluster %q has no certificate %q", name, cert)
					}
					delete(c.Certificates, cert)
					return nil
				})
				return map[string]string{"cluster_name": name, "certificate_name": cert, "status": "success"}, err
			}},
		{method: "GET", path: "/plugins", summary: "List built-in plugins and registered external controllers", ok: http.StatusOK,
			handle: func(r *http.Request, _ auth.User) (any, error) { return m.Plugins(r.Context()) }},
		{method: "POST", path: "/plugins", summary: "Register an external controller by name (admins; no code is installed)", ok: http.StatusOK, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req pluginRequest
				u, err := a.decode(r, u, &req)
				if err != nil {
					return nil, err
				}
				if _, err := m.RegisterPlugin(r.Context(), u, req); err != nil {
					return nil, err
				}
				return map[string]string{"message": "Plugin registered successfully"}, nil
			}},
	}
}

func (a *API) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := auth.FromContext(r.Context())
		if !ok {
			u = auth.AnonymousUser()
		}
		if rt.stream {
			r = r.WithContext(context.WithValue(r.Context(), responseKey{}, w))
		} else {
			ctx, cancel := context.WithTimeout(r.Context(), a.m.cfg.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		body, err := rt.handle(r, u)
		switch {
		case err != nil:
			a.writeError(w, r, err)
		case rt.stream && body == nil: // the handler wrote the response
		case rt.ok == http.StatusNoContent:
			w.WriteHeader(rt.ok)
		default:
			writeJSON(w, rt.ok, body)
		}
	})
}

func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = apiError(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", mbe.Limit)
	}
	e := asAPIError(err)
	if e.Code >= 500 {
		a.m.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if e.Code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pace"`)
	}
	writeJSON(w, e.Code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads a size-limited body in an accepted content type (JSON,
// or YAML when yamlOK); no content type is read as JSON, like Asperathos.
func (a *API) readBody(r *http.Request, yamlOK bool) ([]byte, string, error) {
	ct := r.Header.Get("Content-Type")
	if ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		isYAML := mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" || mt == "text/x-yaml"
		if err != nil || (mt != "application/json" && (!yamlOK || !isYAML)) {
			want := "application/json"
			if yamlOK {
				want += " or application/yaml"
			}
			return nil, "", apiError(http.StatusUnsupportedMediaType, "content type %q: send %s", ct, want)
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, a.m.cfg.MaxBodyBytes))
	if err != nil {
		return nil, "", err
	}
	return data, ct, nil
}

// credentials are the Asperathos authentication fields of a request body.
type credentials struct {
	EnableAuth bool   `json:"enable_auth"`
	Username   string `json:"username"`
	Password   string `json:"password"`
}

// decode reads a JSON body into v (which embeds credentials) and returns
// the caller: the body's user when enable_auth is set, else u.
func (a *API) decode(r *http.Request, u auth.User, v any) (auth.User, error) {
	data, _, err := a.readBody(r, false)
	if err != nil {
		return u, err
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, v); err != nil {
			return u, apiError(http.StatusBadRequest, "invalid JSON: %v", err)
		}
	}
	var c credentials
	_ = json.Unmarshal(data, &c)
	return a.m.credentialsUser(u, c)
}

// bodyUser reads an optional Asperathos {"enable_auth", "username",
// "password"} body and returns the caller.
func (a *API) bodyUser(r *http.Request, u auth.User) (auth.User, error) {
	var c credentials
	return a.decode(r, u, &c)
}

func (m *Manager) credentialsUser(u auth.User, c credentials) (auth.User, error) {
	if !c.EnableAuth {
		return u, nil
	}
	if c.Username == "" || c.Password == "" {
		return u, apiError(http.StatusBadRequest, "enable_auth needs username and password")
	}
	if m.users != nil {
		if got, ok := m.users.Lookup(c.Password); ok && got.Name == c.Username {
			return got, nil
		}
	}
	return u, apiError(http.StatusUnauthorized, "username or password rejected")
}

func (a *API) command(fn func(context.Context, auth.User, string) (*schemas.JobRecord, error)) func(*http.Request, auth.User) (any, error) {
	return func(r *http.Request, u auth.User) (any, error) {
		u, err := a.bodyUser(r, u)
		if err != nil {
			return nil, err
		}
		_, err = fn(r.Context(), u, jobID(r))
		return nil, err
	}
}

func (a *API) report(r *http.Request, u auth.User) (Detailed, *Summary, error) {
	rec, err := a.m.Job(r.Context(), u, jobID(r))
	if err != nil {
		return nil, nil, err
	}
	return a.m.Report(r.Context(), rec)
}

func (a *API) clusters(r *http.Request, u auth.User, activeOnly bool) (any, error) {
	all, err := a.m.Clusters(r.Context(), u)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, c := range all {
		if activeOnly && !c.Active {
			continue
		}
		v := map[string]any{"active": c.Active, "conf_content": c.Config}
		for name, cert := range c.Certificates {
			v[name] = cert
		}
		out[c.Name] = v
	}
	if activeOnly && len(out) == 0 {
		return nil, apiError(http.StatusNotFound, "no cluster is active")
	}
	return out, nil
}

// logs writes a job's log lines as a JSON list, or with ?follow=true as
// NDJSON, flushed line by line, until the job is final and every line sent.
func (a *API) logs(r *http.Request, u auth.User) (any, error) {
	ctx := r.Context()
	rec, err := a.m.Job(ctx, u, jobID(r))
	if err != nil {
		return nil, err
	}
	if r.URL.Query().Get("follow") != "true" {
		lines, err := collectLogs(a.m, ctx, rec.ID)
		if lines == nil {
			lines = []*schemas.LogLine{}
		}
		return lines, err
	}
	w, ok := r.Context().Value(responseKey{}).(http.ResponseWriter)
	if !ok {
		return nil, errors.New("log follow: no response writer")
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	enc := json.NewEncoder(w)
	followCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { // end the follow once the job is final
		for ev, err := range a.m.bus.WatchJob(followCtx, rec.ID) {
			if err != nil || ev.State.Final() {
				break
			}
		}
		stop()
	}()
	sent := 0
	for l, err := range a.m.bus.Logs(followCtx, rec.ID, true) {
		if err != nil {
			break
		}
		_ = enc.Encode(l)
		flush()
		sent++
	}
	if ctx.Err() == nil { // the job ended: send what was logged meanwhile
		lines, _ := collectLogs(a.m, ctx, rec.ID)
		for _, l := range lines[min(sent, len(lines)):] {
			_ = enc.Encode(l)
		}
		flush()
	}
	return nil, nil
}

type responseKey struct{}

// jobID is the request's job id, without the ".json" suffix Asperathos
// clients may add to /submissions/{id}.
func jobID(r *http.Request) string { return strings.TrimSuffix(r.PathValue("id"), ".json") }

func collectLogs(m *Manager, ctx context.Context, job string) ([]*schemas.LogLine, error) {
	var out []*schemas.LogLine
	for l, err := range m.bus.Logs(ctx, job, false) {
		if err != nil {
			return out, err
		}
		out = append(out, l)
	}
	return out, nil
}

func (m *Manager) visualizerURL(rec *schemas.JobRecord) string {
	if m.cfg.VisualizerURL == "" {
		return "URL not generated!"
	}
	if !rec.CleanedAt.IsZero() {
		return "Url is dead!"
	}
	return strings.TrimRight(m.cfg.VisualizerURL, "/") + "/jobs/" + rec.ID
}

// asperathosTime is the format of Asperathos' starting_time.
const asperathosTime = "2006-01-02T15:04:05.000000GMT"

// view is a job as GET /submissions/{id} shows it: Asperathos' fields
// (app_id, status, starting_time, visualizer_url), then Pace's; with
// details, the work counts and, for a finished job, the summary report.
func (m *Manager) view(ctx context.Context, rec *schemas.JobRecord, details bool) map[string]any {
	v := map[string]any{
		"app_id": rec.ID, "status": rec.State, "starting_time": "Job is not running yet!",
		"visualizer_url": m.visualizerURL(rec),
		"id":             rec.ID, "name": rec.Spec.Name, "owner": rec.Spec.Owner, "mode": rec.Spec.Mode,
		"format": rec.Format, "state": rec.State, "created_at": rec.CreatedAt, "total": rec.Total,
		"replicas": rec.Replicas, "stop_requested": rec.StopRequested, "reason": rec.Reason,
		"labels": rec.Spec.Labels,
	}
	if !rec.StartedAt.IsZero() {
		v["starting_time"] = rec.StartedAt.UTC().Format(asperathosTime)
		v["started_at"] = rec.StartedAt
		if dl := rec.Spec.Deadline.Time(rec.StartedAt); !dl.IsZero() {
			v["deadline"] = dl
		}
	}
	if !rec.FinishedAt.IsZero() {
		v["finished_at"] = rec.FinishedAt
	}
	if !rec.CleanedAt.IsZero() {
		v["cleaned_at"] = rec.CleanedAt
	}
	if ws, err := m.bus.JobWork(ctx, rec.ID); err == nil {
		v["done"], v["dead"], v["pending"], v["in_flight"] = ws.Results, ws.Dead, ws.Pending, ws.InFlight
	}
	if !details {
		return v
	}
	v["spec"] = rec.Spec
	if rec.State.Final() {
		if _, s, err := m.Report(ctx, rec); err == nil {
			b, _ := json.Marshal(s)
			var sm map[string]any
			_ = json.Unmarshal(b, &sm)
			for k, val := range sm {
				if _, taken := v[k]; !taken {
					v[k] = val
				}
			}
		}
	}
	return v
}
