package bus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

func TestPresenceCountsRunningWorkers(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	skew := &skewedClock{} // how far the view's clock runs ahead of real time
	p := c.Workers().Presence(skew)
	pctx, stopP := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() { stopP(); <-done })

	idle := func(context.Context, *schemas.WorkItem) (string, error) { return "", nil }
	var cancels []context.CancelFunc
	var stopped []chan error
	for _, id := range []string{"w1", "w.2 (host)"} {
		w, err := c.Worker("seen", idle, bus.WithWorkerID(id))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		ch := make(chan error, 1)
		go func() { ch <- w.Run(wctx) }()
		cancels, stopped = append(cancels, cancel), append(stopped, ch)
	}
	bustest.Eventually(t, 5*time.Second, "two workers present", func() bool { return p.Count("seen") == 2 })
	if n := p.Count("other"); n != 0 {
		t.Errorf("workers of another job = %d, want 0", n)
	}

	cancels[0]() // a clean stop deletes the key
	<-stopped[0]
	bustest.Eventually(t, 5*time.Second, "one worker after a stop", func() bool { return p.Count("seen") == 1 })

	skew.ahead.Store(int64(time.Minute)) // a worker silent for a minute is gone
	if n := p.Count("seen"); n != 0 {
		t.Errorf("workers after a minute of silence = %d, want 0", n)
	}
	cancels[1]()
	<-stopped[1]
}

// skewedClock runs ahead of the real clock by ahead nanoseconds.
type skewedClock struct{ ahead atomic.Int64 }

func (s *skewedClock) Now() time.Time { return time.Now().Add(time.Duration(s.ahead.Load())) }

func (s *skewedClock) Since(t time.Time) time.Duration { return s.Now().Sub(t) }
