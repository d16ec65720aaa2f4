package flowcontrol

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pace-platform/pace/flowcontrol/borrowing"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testConfig() Config {
	return Config{ServerConcurrencyLimit: 4, Levels: []PriorityLevel{
		{Name: "exempt", Exempt: true},
		{Name: "workload", NominalConcurrencyShares: 30, Queues: 4, HandSize: 2, QueueLengthLimit: 1},
		{Name: "catch-all", NominalConcurrencyShares: 10, Reject: true},
	}}
}

func mustController(t *testing.T, clk eventclock.Interface) *Controller {
	t.Helper()
	c, err := New(clk, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHashFlow(t *testing.T) {
	for _, tc := range []struct {
		fs, dist string
		want     uint64
	}{
		{"global-default", "alice", 0xf4de3bd42ccdf6b7},
		{"service-accounts", "system:serviceaccount:default:default", 0xba4dd08bd6ad597f},
		{"kube-controller-manager", "kube-system", 0x1b149fd670be8358},
		{"catch-all", "", 0x6b546fa48f815ead},
	} {
		if got := HashFlow(tc.fs, tc.dist); got != tc.want {
			t.Errorf("HashFlow(%q, %q) = %#x, want %#x", tc.fs, tc.dist, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	cfg := Config{Levels: []PriorityLevel{
		{Name: "a", Queues: 8, HandSize: 9, QueueLengthLimit: 1},
		{Name: "a", Reject: true, LendablePercent: 101},
		{Queues: 8, HandSize: 2},
	}}
	want := "serverConcurrencyLimit: 0 must be positive\n" +
		"levels[0]: handSize 9 is greater than deckSize 8\n" +
		"levels[1].name: duplicate \"a\"\n" +
		"levels[1]: shares and percentages must be non-negative and lendablePercent at most 100\n" +
		"levels[2].name: required\n" +
		"levels[2].queueLengthLimit: 0 must be positive"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want:\n%s", err, want)
	}
	if err := testConfig().Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestStartRequestRejections(t *testing.T) {
	clk := eventclock.NewFake(t0)
	c := mustController(t, clk)
	ctx := context.Background()
	if _, err := c.StartRequest(ctx, WorkEstimate{InitialSeats: 1}, 1, "fs", "nope", "x", Callbacks{}); !errors.Is(err, ErrUnknownPriorityLevel) {
		t.Errorf("unknown level error = %v", err)
	}
	// catch-all's idle limit is 1 seat; a second request is rejected
	r, err := c.StartRequest(ctx, WorkEstimate{InitialSeats: 1}, 0, "fs", "catch-all", "first", Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.StartRequest(ctx, WorkEstimate{InitialSeats: 1}, 0, "fs", "catch-all", "second", Callbacks{})
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Reason != ReasonConcurrencyLimit || rej.RetryAfter != time.Second {
		t.Fatalf("second request error = %v, want concurrency-limit with 1s retry", err)
	}
	if idle := r.Finish(nil); !idle || !c.IsIdle("catch-all") {
		t.Error("catch-all not idle after finishing")
	}
}

func TestStartRequestTimesOut(t *testing.T) {
	clk := eventclock.NewFake(t0)
	c := mustController(t, clk)
	limit := c.Dump()[1].CurrentLimit
	var running []*Request
	for i := range limit {
		r, err := c.StartRequest(context.Background(), WorkEstimate{InitialSeats: 1}, uint64(i), "fs", "workload", "busy", Callbacks{})
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, r)
	}
	ctx, cancel := c.WithWaitLimit(context.Background())
	defer cancel()
	clk.Step(DefaultWaitLimit - time.Nanosecond)
	if ctx.Err() != nil {
		t.Fatal("wait limit ended early")
	}
	clk.Step(time.Nanosecond)
	// The request is queued behind the busy ones and withdrawn at once, because
	// its wait limit has passed.
	_, err := c.StartRequest(ctx, WorkEstimate{InitialSeats: 1}, 99, "fs", "workload", "late", Callbacks{})
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Reason != ReasonTimeOut {
		t.Fatalf("queued request error = %v, want time-out", err)
	}
	for _, r := range running {
		r.Finish(nil)
	}
	if d := c.Dump()[1].QueueSet; d.TimedOut != 1 || d.SeatsInUse != 0 {
		t.Errorf("dump: timed out %d, seats %d; want 1, 0", d.TimedOut, d.SeatsInUse)
	}
}

func TestBorrowingFollowsDemand(t *testing.T) {
	clk := eventclock.NewFake(t0)
	c := mustController(t, clk)
	before := c.Dump()
	// nominal: ceil(4×30/40)=3 and ceil(4×10/40)=1; idle allocation proportional to MinCL
	if diff := cmp.Diff([]borrowing.Limits{{Borrowing: 4, Max: 4}, {Nominal: 3, Borrowing: 4, Min: 3, Max: 7}, {Nominal: 1, Borrowing: 4, Min: 1, Max: 5}},
		[]borrowing.Limits{before[0].Limits, before[1].Limits, before[2].Limits}); diff != "" {
		t.Fatalf("limits (-want +got):\n%s", diff)
	}
	if before[1].CurrentLimit != 3 || before[2].CurrentLimit != 1 || before[1].MaxSeats != 1 {
		t.Errorf("idle current limits %d/%d max seats %d, want 3/1/1", before[1].CurrentLimit, before[2].CurrentLimit, before[1].MaxSeats)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}
