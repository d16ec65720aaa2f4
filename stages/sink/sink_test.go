package sink_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/sink"
)

// recorder is a sink that records what it is given.
type recorder struct {
	mu        sync.Mutex
	written   []string // job@done
	forgotten []string
}

func (r *recorder) Write(p *schemas.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written = append(r.written, fmt.Sprintf("%s@%d", p.Job, p.Done))
}

func (r *recorder) Forget(job string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgotten = append(r.forgotten, job)
}

func (r *recorder) snapshot() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.written), slices.Clone(r.forgotten)
}

// newStage returns a stage feeding s, named after where it starts.
func newStage(t *testing.T, c *bus.Client, s sink.Sink, start sink.Start) *sink.Stage {
	t.Helper()
	name := map[sink.Start]string{sink.Latest: "latest", sink.Durable: "durable"}[start]
	st, err := sink.New(sink.Deps{Bus: c, Sink: s}, sink.Config{Name: name, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func publishProgress(t *testing.T, c *bus.Client, job string, done int) {
	t.Helper()
	ctx := context.Background()
	m, err := bus.NewMsg(ctx, c.Prefix().Metrics(job, schemas.ProgressMetrics),
		&schemas.Progress{Job: job, At: time.Now(), Done: done})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JetStream().PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// TestStageStarts checks where each start position begins, that both
// follow new progress, and that deleted jobs are forgotten, and only they.
func TestStageStarts(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	publishProgress(t, c, "a", 1)
	publishProgress(t, c, "a", 2)
	publishProgress(t, c, "b", 1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	latest, durable := &recorder{}, &recorder{}
	errc := make(chan error, 2)
	for _, st := range []*sink.Stage{newStage(t, c, latest, sink.Latest), newStage(t, c, durable, sink.Durable)} {
		go func() { errc <- st.Run(ctx) }()
	}
	bustest.Eventually(t, 10*time.Second, "latest progress of each job", func() bool {
		w, _ := latest.snapshot()
		return len(w) == 2
	})
	bustest.Eventually(t, 10*time.Second, "durable consumer created", func() bool {
		_, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamMetrics), "sink-durable")
		return err == nil
	})
	publishProgress(t, c, "a", 3)
	// a's resources are released (its record stays): its progress stays
	// exported; b is deleted. The two arrive in this order.
	if err := c.Conn().Publish(c.Prefix().Jobs("a", schemas.EventCleaned), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Conn().Publish(c.Prefix().Jobs("b", schemas.EventDeleted), nil); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, "new progress and the deletion", func() bool {
		lw, lf := latest.snapshot()
		dw, df := durable.snapshot()
		return len(lw) == 3 && len(dw) == 1 && len(lf) >= 1 && len(df) >= 1
	})
	lw, lf := latest.snapshot()
	dw, _ := durable.snapshot()
	if want := []string{"a@2", "b@1", "a@3"}; !slices.Equal(lw, want) {
		t.Errorf("latest sink got %v, want %v", lw, want)
	}
	if want := []string{"a@3"}; !slices.Equal(dw, want) {
		t.Errorf("durable sink got %v, want %v (new progress only)", dw, want)
	}
	if want := []string{"b"}; !slices.Equal(lf, want) {
		t.Errorf("forgotten %v, want %v", lf, want)
	}
	cancel()
	for range 2 {
		if err := <-errc; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	}
}

// TestMalformedProgressIsSetAside sends progress messages no sink can read
// to two sinks on a real bus: each counts them and goes on, and each
// message is kept once, byte for byte, on pace.metrics.<job>.dead.
func TestMalformedProgressIsSetAside(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	latest, durable := &recorder{}, &recorder{}
	stages := []*sink.Stage{newStage(t, c, latest, sink.Latest), newStage(t, c, durable, sink.Durable)}
	errc := make(chan error, len(stages))
	for _, st := range stages {
		go func() { errc <- st.Run(ctx) }()
	}
	bustest.Eventually(t, 10*time.Second, "durable consumer created", func() bool {
		_, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamMetrics), "sink-durable")
		return err == nil
	})
	bad := bustest.PublishMalformed(t, c, c.Prefix().Metrics("m", schemas.ProgressMetrics), &schemas.Progress{Job: "m", At: time.Now(), Done: 1})
	publishProgress(t, c, "m", 7)

	bustest.Eventually(t, 10*time.Second, "the good progress in both sinks", func() bool {
		lw, _ := latest.snapshot()
		dw, _ := durable.snapshot()
		return slices.Contains(lw, "m@7") && slices.Contains(dw, "m@7")
	})
	for _, st := range stages {
		var m dto.Metric
		if err := st.Metrics().(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != float64(len(bad)) {
			t.Errorf("malformed counter = %v, want %d", got, len(bad))
		}
	}
	bustest.WaitKept(t, c, "m", bad)
	bustest.Eventually(t, 10*time.Second, "every message of the durable sink settled", func() bool {
		cons, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamMetrics), "sink-durable")
		return err == nil && cons.CachedInfo().NumAckPending == 0 && cons.CachedInfo().NumPending == 0
	})
	cancel()
	for range stages {
		if err := <-errc; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	}
}
