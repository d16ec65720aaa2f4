package rediswq_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/rediswq"
	"github.com/pace-platform/pace/bus/rediswq/rediswqtest"
	"github.com/pace-platform/pace/schemas"
)

// dial opens a RESP connection to the front for the test's life.
func dial(t *testing.T, addr string) *rediswqtest.Conn {
	t.Helper()
	c, err := rediswqtest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// must sends a command and fails unless the reply is want.
func must(t *testing.T, c *rediswqtest.Conn, want string, args ...string) {
	t.Helper()
	got, err := c.Do(args...)
	if err != nil || got != want {
		t.Fatalf("%v: %s %v, want %s", args, got, err, want)
	}
}

// listen opens a loopback listener for a front.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// A lease key that expired is noticed by the next tick even when a read
// (rediswq's requeue check) met it first, and a worker whose lease ran out
// cannot complete, nor give its late result to, the copy another worker
// now holds.
func TestAnExpiredLeaseReturnsItsItemOnceAndOnlyToItsNewWorker(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	job(t, c, "job", schemas.JobSpec{}, "x")
	clk := clocktesting.NewFakeClock(time.Now())
	ln := listen(t)
	f := rediswq.New(rediswq.Config{Open: rediswq.SharedClient(c), Clock: clk, Tick: time.Hour})
	bustest.Run(t, func(ctx context.Context) error { return f.Serve(ctx, ln) })
	addr := ln.Addr().String()

	slow, idle, next := dial(t, addr), dial(t, addr), dial(t, addr)
	must(t, slow, "$x", "BRPOPLPUSH", "job", "job:processing", "5")
	must(t, slow, "+OK", "SETEX", lease("x"), "1", "slow")
	clk.Step(2 * time.Second) // the key expires; no tick yet
	must(t, idle, ":0", "EXISTS", lease("x"))
	clk.Step(time.Hour) // the tick returns x
	bustest.Eventually(t, time.Minute, "x returned to the queue", func() bool {
		r, err := next.Do("RPOPLPUSH", "job", "job:processing")
		return err == nil && r == "$x"
	})
	must(t, next, "+OK", "SETEX", lease("x"), "60", "next")

	// The slow worker wakes up: its result and its LREM are not next's.
	if r, err := slow.Do("RPUSH", "job:results", "LATE"); err != nil || r[0] != ':' {
		t.Fatalf("RPUSH of a late result: %s %v", r, err)
	}
	must(t, slow, ":0", "LREM", "job:processing", "0", "x")
	must(t, next, ":1", "RPUSH", "job:results", "X")
	must(t, next, ":1", "LREM", "job:processing", "0", "x")
	if got := outputs(t, c, "job"); !slices.Equal(got, []string{"X"}) {
		t.Fatalf("results %v, want [X]: the item's own worker's", got)
	}
}

// A job's worker.timeout bounds a Redis worker's item too: past it, the
// front no longer extends the item's lease, however long its lease key
// lives, so the item returns to the queue after item_timeout, and the job's
// log says why. Each loop turn below is a tick; without the timeout every
// tick would extend the lease and the item would never return.
func TestAnItemPastWorkerTimeoutIsNoLongerExtended(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	job(t, c, "job", schemas.JobSpec{ItemTimeout: schemas.Duration(2 * time.Second),
		Worker: schemas.WorkerSpec{Timeout: schemas.Duration(time.Second)}}, "x")
	clk := clocktesting.NewFakeClock(time.Now())
	ln := listen(t)
	var mu sync.Mutex
	var journal []string
	f := rediswq.New(rediswq.Config{Open: rediswq.SharedClient(c), Clock: clk, Tick: time.Second,
		Journal: func(_ context.Context, l *schemas.LogLine) error {
			mu.Lock()
			defer mu.Unlock()
			journal = append(journal, l.Line)
			return nil
		}})
	bustest.Run(t, func(ctx context.Context) error { return f.Serve(ctx, ln) })
	addr := ln.Addr().String()

	slow, next := dial(t, addr), dial(t, addr)
	must(t, slow, "$x", "BRPOPLPUSH", "job", "job:processing", "5")
	must(t, slow, "+OK", "SETEX", lease("x"), "600", "slow")
	bustest.Eventually(t, time.Minute, "x back on the queue", func() bool {
		clk.Step(time.Second)
		r, err := next.Do("RPOPLPUSH", "job", "job:processing")
		return err == nil && r == "$x"
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(journal, func(l string) bool { return strings.Contains(l, "timed out after 1s") }) {
		t.Errorf("job log %q, want a line saying x timed out after 1s", journal)
	}
}
