//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/localtest"
	"github.com/pace-platform/pace/schemas"
)

// bins are built once for every test of the run.
var bins Binaries

// workerBin is a copy of this test binary that sandboxed workers can run.
var workerBin string

// envWorker makes the test binary an SDK worker process (see sdkWorker).
const envWorker = "PACE_CHAOS_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(sdkWorker(os.Getenv("PACE_WORKER_ID")))
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	// The gates run the job's workers sandboxed, as their own users: the
	// worker (this binary) must be where they reach it.
	dir, err := localtest.ProgramDir("pace-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir) //nolint:errcheck // a temporary directory
	if workerBin, err = copyExecutable(os.Args[0], dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if bins, err = Build(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("built pace and nats-server in %s\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

// sdkWorker runs a Go SDK worker whose result is the item's payload, with
// the job, NATS URL and worker id the local runtime gives a job's own worker
// command (PACE_JOB, PACE_NATS_URL, PACE_WORKER_ID). It is what a quick item
// costs without a process per item, so 20,000 of them fit the time budget.
func sdkWorker(id string) int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := []bus.Option{bus.WithName("chaos-worker-" + id), bus.WithLogger(log), bus.WithConnectTimeout(0)}
	if token := os.Getenv("PACE_TOKEN"); token != "" { // the job's token, from the gate
		opts = append(opts, bus.WithTokenAuth(token))
	}
	c, err := bus.Connect(ctx, os.Getenv("PACE_NATS_URL"), opts...)
	if err != nil {
		log.Error("connect", "err", err)
		return 1
	}
	defer c.Close(context.Background()) //nolint:errcheck // exiting
	echo := func(_ context.Context, it *schemas.WorkItem) (string, error) { return it.Payload, nil }
	wopts := []bus.WorkerOption{bus.WithConcurrency(16)}
	if id != "" {
		wopts = append(wopts, bus.WithWorkerID(id))
	}
	w, err := c.Worker(os.Getenv("PACE_JOB"), echo, wopts...)
	if err != nil {
		log.Error("worker", "err", err)
		return 2
	}
	if err := w.Run(ctx); err != nil {
		log.Error("worker", "err", err)
		return 1
	}
	return 0
}

// copyExecutable copies the executable src into dir and returns the copy's
// path.
func copyExecutable(src, dir string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(src))
	return dst, os.WriteFile(dst, b, 0o755)
}
