package processor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/processor"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// TestStage sends good and malformed raw samples through a real bus and
// checks the progress published and the malformed ones dead-lettered.
func TestStage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := bustest.Client(t, bustest.Server(t))
	js := c.JetStream()

	var mu sync.Mutex
	var progress []schemas.Progress
	var dead []schemas.DeadLetter
	sub, err := c.Conn().Subscribe(c.Prefix().Metrics("*", "*"), func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		switch m.Header.Get(schemas.HeaderSchema) {
		case "progress":
			p, err := bus.Decode[schemas.Progress](m.Data, m.Header)
			if err != nil {
				t.Errorf("progress: %v", err)
				return
			}
			progress = append(progress, *p)
		case "dead_letter":
			d, err := bus.Decode[schemas.DeadLetter](m.Data, m.Header)
			if err != nil {
				t.Errorf("dead letter: %v", err)
				return
			}
			dead = append(dead, *d)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck

	st, err := processor.New(processor.Deps{Bus: c}, processor.Config{}, processor.WithClock(testingclock.NewFakeClock(t0.Add(time.Minute))))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- st.Run(ctx) }()
	bustest.Eventually(t, 10*time.Second, "processor consumer", func() bool {
		_, err := js.Consumer(ctx, c.Prefix().Stream(schemas.StreamMetrics), processor.DefaultDurable)
		return err == nil
	})

	sample := func(at time.Duration, done int) *schemas.Sample {
		return &schemas.Sample{Job: "j", At: t0.Add(at), Mode: schemas.Batch, State: schemas.Ongoing, Total: 100,
			Done: done, Pending: 100 - done, Replicas: 2, StartedAt: t0, Deadline: t0.Add(100 * time.Second)}
	}
	publish := func(m *nats.Msg) {
		t.Helper()
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*schemas.Sample{sample(10*time.Second, 20), sample(20*time.Second, 50), sample(15*time.Second, 30)} {
		m, err := bus.NewMsg(ctx, c.Prefix().Metrics("j", schemas.RawMetrics), s)
		if err != nil {
			t.Fatal(err)
		}
		publish(m)
	}
	valid, err := bus.NewMsg(ctx, c.Prefix().Metrics("k", schemas.RawMetrics), sample(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	bad := bustest.Malformed(c.Prefix().Metrics("k", schemas.RawMetrics), valid)
	negative := nats.NewMsg(c.Prefix().Metrics("k", schemas.RawMetrics))
	negative.Data = []byte(`{"job":"k","at":"2026-11-29T12:00:00Z","pending":-1}`)
	negative.Header.Set(bustest.CaseHeader, "invalid")
	bad["invalid"] = negative
	for _, m := range bad {
		publish(m)
	}
	// Too large for its dead letter to carry its body (base64 would pass
	// max_payload): the body goes to the dead-letter object store.
	huge := nats.NewMsg(c.Prefix().Metrics("k", schemas.RawMetrics))
	huge.Data = make([]byte, 900<<10)
	publish(huge)
	// The stage goes on after them.
	m, err := bus.NewMsg(ctx, c.Prefix().Metrics("j", schemas.RawMetrics), sample(30*time.Second, 60))
	if err != nil {
		t.Fatal(err)
	}
	publish(m)

	bustest.Eventually(t, 10*time.Second, "3 progress messages and a dead letter per malformed sample", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 3 && len(dead) >= len(bad)+1
	})
	mu.Lock()
	// The third sample is older than the second: stale, no progress.
	tests := []struct{ jp, tp, err, rate float64 }{{0.2, 0.1, 0.1, 2}, {0.5, 0.2, 0.3, 3}}
	for i, want := range tests {
		p := progress[i]
		if p.JobProgress != want.jp || p.TimeProgress != want.tp || p.Error != want.err || p.Throughput != want.rate {
			t.Errorf("progress %d = %+v, want job %v time %v error %v throughput %v", i, p, want.jp, want.tp, want.err, want.rate)
		}
	}
	var stored []*schemas.DeadLetter
	for i := range dead {
		if dead[i].Job != "k" {
			t.Errorf("dead letter of job %q, want k (from the subject)", dead[i].Job)
		}
		if dead[i].RawObject != "" {
			if dead[i].RawSize != int64(len(huge.Data)) {
				t.Errorf("the huge sample's letter names %d bytes, want %d", dead[i].RawSize, len(huge.Data))
			}
			continue
		}
		stored = append(stored, &dead[i])
	}
	bustest.CheckKept(t, bad, stored)
	mu.Unlock()
	bustest.Eventually(t, 10*time.Second, "every sample acknowledged", func() bool {
		cons, err := js.Consumer(ctx, c.Prefix().Stream(schemas.StreamMetrics), processor.DefaultDurable)
		return err == nil && cons.CachedInfo().NumAckPending == 0 && cons.CachedInfo().NumPending == 0
	})
	if got := counter(t, st.Metrics().Collector("malformed")); got != float64(len(bad)+1) {
		t.Errorf("malformed counter = %v, want %d", got, len(bad)+1)
	}
	if got := counter(t, st.Metrics().Collector("stale")); got != 1 {
		t.Errorf("stale counter = %v, want 1", got)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
