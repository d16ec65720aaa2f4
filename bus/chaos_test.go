package bus_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

func startWorkerProcess(t *testing.T, url, job, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorkerURL+"="+url, envWorkerJob+"="+job, envWorkerID+"="+id)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func storedResults(t *testing.T, ctx context.Context, c *bus.Client) uint64 {
	st, err := c.JetStream().Stream(ctx, "PACE_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// checkExactlyOnce fails unless results hold exactly one result per item.
func checkExactlyOnce(t *testing.T, items []schemas.WorkItem, results []*schemas.Result) {
	t.Helper()
	seen := make(map[string]int, len(results))
	for _, r := range results {
		seen[r.ItemID]++
	}
	for _, it := range items {
		if seen[it.ID] != 1 {
			t.Errorf("item %s has %d results, want 1", it.ID, seen[it.ID])
		}
	}
	if len(results) != len(items) {
		t.Errorf("%d results for %d items", len(results), len(items))
	}
}

func manyItems(n int) []schemas.WorkItem {
	items := make([]schemas.WorkItem, n)
	for i := range items {
		items[i].Payload = strconv.Itoa(i)
	}
	return items
}

func TestKilledWorkerProcessLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	ctx := testCtx(t)
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	const job, n = "kill", 10_000
	declare(t, ctx, c, job, 2*time.Second, 5)
	items := manyItems(n)
	if err := c.PushItems(ctx, job, items); err != nil {
		t.Fatal(err)
	}
	var workers []*exec.Cmd
	for i := range 4 {
		workers = append(workers, startWorkerProcess(t, s.ClientURL(), job, fmt.Sprintf("w%d", i)))
	}
	bustest.Eventually(t, 30*time.Second, "2,000 results before the kill", func() bool {
		return storedResults(t, ctx, c) >= 2000
	})
	if err := workers[0].Process.Kill(); err != nil { // SIGKILL: no chance to clean up
		t.Fatal(err)
	}
	_ = workers[0].Wait()

	results := readResults(t, ctx, c, job)
	checkExactlyOnce(t, items, results)
	byWorker := map[string]int{}
	for _, r := range results {
		byWorker[r.Worker]++
	}
	if byWorker["w0"] == 0 {
		t.Errorf("the killed worker produced no result before dying: %v", byWorker)
	}
	// The survivors stop gracefully on SIGTERM.
	for _, w := range workers[1:] {
		if err := w.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := w.Wait(); err != nil {
			t.Errorf("worker exit after SIGTERM: %v, want status 0", err)
		}
	}
}

func TestServerRestartMidRunLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	s := bustest.ServerAt(t, dir, addr)
	c := bustest.Client(t, s)
	const job, n = "restart", 3000
	declare(t, ctx, c, job, 2*time.Second, 5)
	items := manyItems(n)
	if err := c.PushItems(ctx, job, items); err != nil {
		t.Fatal(err)
	}

	wc, err := bus.Connect(ctx, "nats://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wc.Close(context.Background()) })
	slow := func(ctx context.Context, it *schemas.WorkItem) (string, error) {
		select {
		case <-time.After(time.Millisecond):
			return it.Payload, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	w, err := wc.Worker(job, slow, bus.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	bustest.Eventually(t, 30*time.Second, "500 results before the restart", func() bool {
		return w.Stats().Processed >= 500
	})
	s.Shutdown()
	s2 := bustest.ServerAt(t, dir, addr)
	c2 := bustest.Client(t, s2) // re-provisioning a live store is a no-op

	checkExactlyOnce(t, items, readResults(t, ctx, c2, job))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
