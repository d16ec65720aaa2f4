package manager

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"

	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
)

func (m *Stage) visualizerURL(rec *schemas.JobRecord) string {
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
// (app_id, status, starting_time, visualizer_url, redis_ip and redis_port
// with a Redis front), then Pace's; with
// details, the work counts and, for a finished job, the summary report.
func (m *Stage) view(ctx context.Context, rec *schemas.JobRecord, details bool) map[string]any {
	v := map[string]any{
		"app_id": rec.ID, "status": rec.State, "starting_time": "Job is not running yet!",
		"visualizer_url": m.visualizerURL(rec),
		"id":             rec.ID, "name": rec.Spec.Name, "owner": rec.Spec.Owner, "mode": rec.Spec.Mode,
		"format": rec.Format, "state": rec.State, "created_at": rec.CreatedAt,
		"replicas": replicas(rec), "stop_requested": rec.StopRequested, "reason": rec.Reason,
		"labels": rec.Spec.Labels,
	}
	if host, port, err := net.SplitHostPort(m.cfg.RedisAddr); err == nil {
		v["redis_ip"] = host
		v["redis_port"], _ = strconv.Atoi(port)
	}
	if rec.Spec.Mode != schemas.Streaming {
		v["total"] = rec.Total // a streaming job's items keep coming: it has no total
	}
	if !rec.StartedAt.IsZero() {
		v["starting_time"] = rec.StartedAt.UTC().Format(asperathosTime)
		v["started_at"] = rec.StartedAt
		if dl := rec.Spec.Deadline.Time(rec.StartedAt); !dl.IsZero() {
			v["deadline"] = dl
		}
	}
	if p := rec.Prediction; p != nil {
		v["prediction"] = p
		if p.Feasible != nil {
			v["confidence"] = confidence(p)
			if !rec.StartedAt.IsZero() {
				v["predicted_completion"] = rec.StartedAt.Add(p.ETA.D())
			}
		}
	}
	if !rec.FinishedAt.IsZero() {
		v["finished_at"] = rec.FinishedAt
	}
	if !rec.CleanedAt.IsZero() {
		v["cleaned_at"] = rec.CleanedAt
	}
	if sc, err := tracing.Parse(rec.Trace); err == nil {
		v["trace_id"] = sc.TraceID().String()
	}
	if ws, err := m.bus.JobWork(ctx, rec); err == nil {
		v["done"], v["dead"], v["pending"], v["in_flight"] = ws.Results, ws.Dead, ws.Pending, ws.InFlight
		v["refused"] = ws.Refused // items published while it did not accept them
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

// replicas are the workers a job has: none once it is finished, whatever
// its record's last scale said.
func replicas(rec *schemas.JobRecord) int {
	if rec.State.Final() {
		return 0
	}
	return rec.Replicas
}
