package bus_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/leaktest"
	"github.com/pace-platform/pace/schemas"
)

// Environment of a worker process started by a test (see startWorkerProcess).
const (
	envWorkerURL = "BUS_TEST_WORKER_URL"
	envWorkerJob = "BUS_TEST_WORKER_JOB"
	envWorkerID  = "BUS_TEST_WORKER_ID"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envWorkerURL); url != "" {
		os.Exit(workerProcess(url, os.Getenv(envWorkerJob), os.Getenv(envWorkerID)))
	}
	leaktest.Main(m) // fails the package when a test leaves a goroutine behind
}

// workerProcess is the body of a worker process: it echoes items until SIGTERM.
func workerProcess(url, job, id string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c, err := bus.Connect(ctx, url, bus.WithName(id))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w, err := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return it.Payload, nil
	}, bus.WithConcurrency(8), bus.WithWorkerID(id))
	if err == nil {
		err = w.Run(ctx)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(cctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
