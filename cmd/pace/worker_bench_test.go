package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/execpool"
	"github.com/pace-platform/pace/schemas"
)

var benchJobs atomic.Int64

// inProcess is BenchmarkExecModes' reference: a handler that returns the
// payload without a command, the bus's own ceiling.
const inProcess = "in-process"

// BenchmarkExecModes measures the items/s of a worker whose command is cat,
// forked per item (item) or streamed through one process per slot (lines),
// at concurrency 1 and 8, side by side on one embedded bus, beside a handler
// that runs no command: the items are queued before the clock starts, which
// stops once every item is done.
func BenchmarkExecModes(b *testing.B) {
	c := bustest.Client(b, bustest.Server(b))
	for _, concurrency := range []int{1, 8} {
		for _, mode := range []string{schemas.ExecItem, schemas.ExecLines, inProcess} {
			b.Run(fmt.Sprintf("%s/c=%d", mode, concurrency), func(b *testing.B) { benchExec(b, c, mode, concurrency) })
		}
	}
}

func benchExec(b *testing.B, c *bus.Client, mode string, concurrency int) {
	ctx := context.Background()
	job := fmt.Sprintf("exec%d", benchJobs.Add(1))
	if _, err := c.OpenJob(ctx, job); err != nil {
		b.Fatal(err)
	}
	items := make([]schemas.WorkItem, b.N)
	for i := range items {
		items[i].Payload = strconv.Itoa(i)
	}
	if err := c.PushItems(ctx, job, items); err != nil {
		b.Fatal(err)
	}
	h := execpool.NewPerItem("cat", cleanEnv(), nil).Handle
	switch mode {
	case inProcess:
		h = func(_ context.Context, it *schemas.WorkItem) (string, error) { return it.Payload, nil }
	case schemas.ExecLines:
		pool, err := execpool.New(execpool.Config{Command: "cat", Mode: execpool.Mode(mode), Processes: concurrency},
			slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		h = pool.Handle
	}
	var done atomic.Int64
	finished := make(chan struct{})
	w, err := c.Worker(job, func(ctx context.Context, it *schemas.WorkItem) (string, error) {
		out, err := h(ctx, it)
		if err != nil {
			return "", err
		}
		if out != it.Payload {
			b.Errorf("item %s: result %q, want its payload %q", it.ID, out, it.Payload)
		}
		if done.Add(1) == int64(b.N) {
			close(finished)
		}
		return out, nil
	}, bus.WithConcurrency(concurrency))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(wctx) })
	<-finished
	b.StopTimer()
	stop()
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}
