// Package bustest starts real embedded NATS JetStream servers for tests.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// Server starts an embedded server listening on a random loopback port with
// its store in a temporary directory, and stops it when the test ends.
func Server(t testing.TB) *bus.Server {
	t.Helper()
	return ServerAt(t, t.TempDir(), "127.0.0.1:0")
}

// ServerAt starts an embedded server on dir and listen (see bus.ServerConfig)
// and stops it when the test ends, unless the test shut it down already.
func ServerAt(t testing.TB, dir, listen string) *bus.Server {
	t.Helper()
	s, err := bus.StartServer(bus.ServerConfig{DataDir: dir, Listen: listen, MaxMemory: 64 << 20, MaxStore: 1 << 30}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Client connects to s in-process, provisions the bus and closes the client
// when the test ends.
func Client(t testing.TB, s *bus.Server, opts ...bus.Option) *bus.Client {
	t.Helper()
	return provisioned(t, "", append([]bus.Option{bus.WithServer(s)}, opts...))
}

// provisioned connects to url, provisions the bus with automatic replicas
// and closes the client when the test ends.
func provisioned(t testing.TB, url string, opts []bus.Option) *bus.Client {
	t.Helper()
	// Replicated streams are slower to create, the more so under -race.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := bus.Connect(ctx, url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// MinWait is the least Eventually waits before it gives up.
const MinWait = 2 * time.Minute

// Eventually polls cond every 20ms until it holds. It bounds waits on the
// server's own timers, which tests cannot step, and on other goroutines.
//
// timeout is what the wait is expected to take and a floor of its bound:
// the test fails only once max(timeout, MinWait) has passed. A wait ends as
// soon as cond holds, so a generous bound costs a passing test nothing,
// while a slow machine (-race, two cores, packages tested in parallel) must
// not fail a test that is merely late; a wait that outlives timeout is
// logged. A wait whose timing is what the test checks (something happens
// before a TTL) must not rely on Eventually's bound: give the event a margin
// far beyond MinWait instead, or assert on the order of events.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	limit := max(timeout, MinWait)
	for !cond() {
		if waited := time.Since(start); waited > limit {
			t.Fatalf("timed out after %s waiting for %s", waited.Round(time.Millisecond), what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waited := time.Since(start); waited > timeout {
		t.Logf("slow: waited %s for %s, expected within %s", waited.Round(time.Millisecond), what, timeout)
	}
}

// Publish stores m on subject with Pace's headers, failing the test on error.
func Publish(t testing.TB, c *bus.Client, subject string, m schemas.Message) {
	t.Helper()
	if err := c.Publish(context.Background(), subject, m, ""); err != nil {
		t.Fatal(err)
	}
}

// Run runs a blocking loop (a stage's Run) until the test ends, then cancels
// it and fails the test if it returned an error.
func Run(t testing.TB, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

// KeepLedger keeps c's ledger until the test ends, entering every item, as
// the manager does for a streaming job: without it a streaming job's
// results do not count (see bus.Queues.KeepLedger).
func KeepLedger(t testing.TB, c *bus.Client) {
	t.Helper()
	Run(t, func(ctx context.Context) error {
		return c.Queues().KeepLedger(ctx, func(context.Context, string) (bus.Placement, error) {
			return bus.Placement{Enter: true, Release: true}, nil
		})
	})
}
