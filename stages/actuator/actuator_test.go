package actuator_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/pace-platform/pace/internal/leaktest"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/localtest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator"
	"github.com/pace-platform/pace/stages/gate/targets/local"
)

var paceBin string

func TestMain(m *testing.M) {
	var err error
	if paceBin, err = localtest.Program("pace", ".", "github.com/pace-platform/pace/cmd/pace"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	leaktest.Main(m) // fails the package when a test leaves a goroutine behind
}

// TestDecisionsScaleRealWorkersThroughTheGate runs the actuator, the APF bus
// gate and the local runtime with real `pace worker` processes.
func TestDecisionsScaleRealWorkersThroughTheGate(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	ctx := context.Background()
	const job = "squares"
	if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming,
		Worker: schemas.WorkerSpec{Exec: "read n; echo $((n*n))"}}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var admitted []schemas.AdmissionEvent
	sub, err := c.Conn().Subscribe(c.Prefix().Admission("*", "*"), func(m *nats.Msg) {
		if ev, err := bus.Decode[schemas.AdmissionEvent](m.Data, m.Header); err == nil {
			mu.Lock()
			admitted = append(admitted, *ev)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	rt, err := local.New(local.Config{Binary: paceBin, NATSURL: s.ClientURL(), Grace: 5 * time.Second}, local.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, rt.Run)
	runGate(t, c, local.AsTarget(rt).Runtime, log)
	bustest.Run(t, newActuator(t, c, actuator.WithLogger(log)).Run)
	presence := c.Workers().Presence(nil)
	bustest.Run(t, presence.Run)

	bustest.Publish(t, c, c.Prefix().Decisions(job), &schemas.Decision{Job: job, At: time.Now(), Replicas: 2, Current: 0, Reason: "test wants two"})
	bustest.Eventually(t, 20*time.Second, "two live workers", func() bool { return presence.Count(job) == 2 })

	items := bus.Items("1", "2", "3", "4", "5", "6", "7", "8", "9", "10")
	if err := c.PushItems(ctx, job, items); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, bustest.MinWait)
	defer cancel()
	n := 0
	for r, err := range c.Outputs().Results(rctx, job) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Output == "" {
			t.Errorf("empty result for %s", r.ItemID)
		}
		n++
	}
	if n != len(items) {
		t.Fatalf("%d results, want %d", n, len(items))
	}

	bustest.Publish(t, c, c.Prefix().Jobs(job, schemas.EventTerminated),
		&schemas.JobEvent{Job: job, Type: schemas.EventTerminated, State: schemas.Terminated, At: time.Now()})
	bustest.Eventually(t, 10*time.Second, "workers killed on terminate", func() bool { return rt.Running(job) == 0 })

	mu.Lock()
	defer mu.Unlock()
	verbs := 0
	for _, ev := range admitted {
		if ev.Outcome != schemas.Dispatched || ev.FlowSchema != "service-accounts" {
			t.Errorf("admission event %+v, want dispatched by flow schema service-accounts", ev)
		}
		verbs++
	}
	if verbs < 2 {
		t.Errorf("%d admission events, want the scale and the delete", verbs)
	}
}

// newActuator returns the actuator stage on c, failing the test if it
// cannot be made.
func newActuator(tb testing.TB, c actuator.Bus, opts ...actuator.Option) *actuator.Stage {
	tb.Helper()
	st, err := actuator.New(actuator.Deps{Bus: c}, actuator.Config{}, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}
