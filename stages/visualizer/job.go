package visualizer

import (
	"context"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
)

// maxPoints bounds the samples drawn in a chart; maxDecisions the
// decisions listed.
const (
	maxPoints    = 240
	maxDecisions = 30
)

// JobView is the job page's data: the job, its work, charts, decisions
// and log tail.
type JobView struct {
	JobRow
	Reason        string             `json:"reason,omitempty"`
	TraceURL      string             `json:"trace_url,omitempty"`
	StopRequested bool               `json:"stop_requested,omitempty"`
	Final         bool               `json:"final"`
	Pending       int                `json:"pending"`
	Processing    int                `json:"processing"`
	Dead          int                `json:"dead"`
	Latest        *schemas.Progress  `json:"latest,omitempty"`
	ProgressSVG   string             `json:"progress_svg"`
	ReplicasSVG   string             `json:"replicas_svg"`
	Decisions     []Decision         `json:"decisions"`
	Log           []*schemas.LogLine `json:"log"`
}

// Decision is a scaling decision or lifecycle event with its reason.
type Decision struct {
	At       time.Time            `json:"at"`
	Type     schemas.JobEventType `json:"type"`
	Replicas int                  `json:"replicas,omitempty"`
	Reason   string               `json:"reason,omitempty"`
}

func (s *Stage) view(ctx context.Context, rec *schemas.JobRecord) (*JobView, error) {
	v := &JobView{JobRow: JobRow{ID: rec.ID, Name: rec.Spec.Name, Owner: rec.Spec.Owner, State: rec.State,
		Total: rec.Total, Replicas: rec.Replicas, Created: rec.CreatedAt},
		Reason: rec.Reason, StopRequested: rec.StopRequested, Final: rec.State.Final(),
		Decisions: []Decision{}, Log: []*schemas.LogLine{}}
	if sc, err := tracing.Parse(rec.Trace); err == nil && s.cfg.TraceURL != "" {
		v.TraceURL = strings.ReplaceAll(s.cfg.TraceURL, "{trace_id}", sc.TraceID().String())
	}
	if !rec.StartedAt.IsZero() {
		if dl := rec.Spec.Deadline.Time(rec.StartedAt); !dl.IsZero() {
			v.Deadline = &dl
		}
	}
	if ws, err := s.bus.JobWork(ctx, rec); err == nil {
		v.Done, v.Dead, v.Pending, v.Processing = ws.Results+ws.Dead, ws.Dead, ws.Pending, ws.InFlight
		if rec.Total > 0 {
			v.Progress = min(1, float64(v.Done)/float64(rec.Total))
		}
	}
	if rec.State == schemas.Completed {
		v.Progress = 1
	}
	// The three reads each wait for the bus' fetch to end: run them at once.
	var ps []*schemas.Progress
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { ps, err = s.bus.Outputs().StoredProgress(gctx, rec.ID); return err })
	g.Go(func() error {
		for ev, err := range s.bus.Jobs().Events(gctx, rec.ID, false) {
			if err != nil {
				return err
			}
			v.Decisions = append(v.Decisions, Decision{At: ev.At, Type: ev.Type, Replicas: ev.Replicas, Reason: ev.Reason})
		}
		if n := len(v.Decisions); n > maxDecisions {
			v.Decisions = v.Decisions[n-maxDecisions:]
		}
		return nil
	})
	g.Go(func() error {
		for l, err := range s.bus.Outputs().Logs(gctx, rec.ID, false) {
			if err != nil {
				return err
			}
			v.Log = append(v.Log, l)
			if len(v.Log) > 2*s.cfg.LogTail {
				v.Log = append(v.Log[:0], v.Log[len(v.Log)-s.cfg.LogTail:]...)
			}
		}
		if n := len(v.Log); n > s.cfg.LogTail {
			v.Log = v.Log[n-s.cfg.LogTail:]
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(ps) > 0 {
		v.Latest = ps[len(ps)-1]
	}
	ps = downsample(ps, maxPoints)
	v.ProgressSVG = progressChart(ps, v.Deadline)
	v.ReplicasSVG = replicasChart(ps)
	return v, nil
}

// jobEvents streams one job's page: a "job" event whenever it changes,
// ending after the job is final.
func (s *Stage) jobEvents(w http.ResponseWriter, r *http.Request) {
	u, release, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer release()
	ctx, id := r.Context(), trimID(r)
	next := func() (*JobView, error) {
		rec, err := s.job(ctx, u, id)
		if err != nil {
			return nil, err
		}
		return s.view(ctx, rec)
	}
	first, err := next()
	if err != nil {
		writeError(w, err)
		return
	}
	st, ok := startStream(w)
	if !ok {
		return
	}
	wake, unsubscribe := s.wakeups.subscribe(id) // this job's events wake the stream
	defer unsubscribe()
	s.loop(ctx, st, wake, "job", first, func() (any, error) { return next() })
}

func downsample(ps []*schemas.Progress, n int) []*schemas.Progress {
	if len(ps) <= n {
		return ps
	}
	out := make([]*schemas.Progress, 0, n)
	step := float64(len(ps)-1) / float64(n-1)
	for i := range n {
		out = append(out, ps[int(float64(i)*step+0.5)])
	}
	return out
}
