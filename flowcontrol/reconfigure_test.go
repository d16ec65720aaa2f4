package flowcontrol_test

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
)

// TestReconfigureKeepsAndLingers: a level that stays keeps its queue and
// seats; a removed level with a queued request lingers until that request
// has run, and is then dropped.
func TestReconfigureKeepsAndLingers(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(0, 0))
	q := flowcontrol.PriorityLevel{Name: "q", NominalConcurrencyShares: 1, Queues: 1, HandSize: 1, QueueLengthLimit: 10}
	other := flowcontrol.PriorityLevel{Name: "other", NominalConcurrencyShares: 1, Queues: 4, HandSize: 1, QueueLengthLimit: 10}
	zero := 0
	q.BorrowingLimitPercent, other.BorrowingLimitPercent = &zero, &zero
	ctl, err := flowcontrol.New(clk, flowcontrol.Config{ServerConcurrencyLimit: 2, Levels: []flowcontrol.PriorityLevel{q, other}})
	if err != nil {
		t.Fatal(err)
	}
	one := flowcontrol.WorkEstimate{InitialSeats: 1}
	held, err := ctl.StartRequest(context.Background(), one, 1, "fs", "q", "a", flowcontrol.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		r, err := ctl.StartRequest(context.Background(), one, 1, "fs", "q", "b", flowcontrol.Callbacks{})
		if err == nil {
			r.Finish(func() {})
		}
		queued <- err
	}()
	for ctl.Dump()[0].QueueSet.Waiting != 1 {
		time.Sleep(time.Millisecond) // the goroutine above enqueues; no clock involved
	}
	// Remove q: it lingers with its executing and waiting requests.
	if err := ctl.Reconfigure(flowcontrol.Config{ServerConcurrencyLimit: 2, Levels: []flowcontrol.PriorityLevel{other}}); err != nil {
		t.Fatal(err)
	}
	d := ctl.Dump()
	if len(d) != 2 || d[1].Name != "q" || !d[1].Lingering || d[1].QueueSet.Waiting != 1 {
		t.Fatalf("after removal: %+v", d)
	}
	held.Finish(func() {})
	if err := <-queued; err != nil {
		t.Fatalf("queued request of the removed level: %v, want dispatched", err)
	}
	ctl.AdjustBorrowing() // drops the now idle lingering level
	if d := ctl.Dump(); len(d) != 1 || d[0].Name != "other" {
		t.Fatalf("after draining: %+v", d)
	}
	if _, err := ctl.StartRequest(context.Background(), one, 1, "fs", "q", "c", flowcontrol.Callbacks{}); err == nil {
		t.Error("request admitted to a removed level")
	}
}
