package targets_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// TestUsageIsMeasuredEveryInterval runs the usage reporter on a fake clock:
// each UsageInterval it publishes a gauge job's use as measured, and a
// process job's cumulative CPU seconds as the cores used since the last
// measure (its first measure only sets the baseline).
func TestUsageIsMeasuredEveryInterval(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	sub, err := c.Conn().SubscribeSync(c.Prefix().Metrics("*", schemas.UsageMetrics))
	if err != nil {
		t.Fatal(err)
	}
	var cpu atomic.Int64 // the process job's CPU seconds so far
	meter := func(context.Context) []targets.Use {
		return []targets.Use{
			{Job: "procs", CPU: float64(cpu.Load()), Cumulative: true, Replicas: 2, Source: "local"},
			{Job: "pods", CPU: 1.5, MemoryBytes: 1 << 30, Replicas: 3, Source: "metrics"},
		}
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	u := targets.NewUsageReporter(c, []targets.Meter{meter}, targets.WithClock(clk))
	bustest.Run(t, u.Run)
	next := func() *schemas.Usage {
		t.Helper()
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("no usage: %v", err)
		}
		use, err := bus.Decode[schemas.Usage](m.Data, m.Header)
		if err != nil {
			t.Fatal(err)
		}
		return use
	}
	tick := func() {
		t.Helper()
		bustest.Eventually(t, 10*time.Second, "the reporter's ticker", clk.HasWaiters)
		clk.Step(targets.UsageInterval)
	}

	tick() // the process job's baseline: only the pods are published
	if use := next(); use.Job != "pods" || use.CPUCores != 1.5 || use.MemoryBytes != 1<<30 || use.Replicas != 3 {
		t.Fatalf("first measure %+v, want the pods' gauge alone", use)
	}
	cpu.Store(3) // 3 CPU seconds in one interval of 2 s: 1.5 cores
	tick()
	got := map[string]*schemas.Usage{}
	for range 2 {
		use := next()
		got[use.Job] = use
	}
	if p := got["procs"]; p == nil || math.Abs(p.CPUCores-1.5) > 1e-9 || !p.At.Equal(clk.Now()) {
		t.Errorf("second measure of procs %+v, want 1.5 cores at the clock's %v", p, clk.Now())
	}
	if got["pods"] == nil {
		t.Error("second measure has no pods")
	}
}
