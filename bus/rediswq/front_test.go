package rediswq_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/rediswq"
	"github.com/pace-platform/pace/bus/rediswq/rediswqtest"
	"github.com/pace-platform/pace/schemas"
)

// front serves the Redis protocol on a loopback port for the test's life.
func front(t *testing.T, cfg rediswq.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tick = 100 * time.Millisecond
	f := rediswq.New(cfg)
	bustest.Run(t, func(ctx context.Context) error { return f.Serve(ctx, ln) })
	return ln.Addr().String()
}

// job declares a streaming job with items queued.
func job(t *testing.T, c *bus.Client, id string, spec schemas.JobSpec, items ...string) {
	t.Helper()
	spec.Mode = schemas.Streaming
	if _, err := c.DeclareJob(context.Background(), id, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.PushItems(context.Background(), id, bus.Items(items...)); err != nil {
		t.Fatal(err)
	}
}

// worker starts worker.py against the front at addr.
func worker(t *testing.T, addr, queue string, env ...string) *exec.Cmd {
	t.Helper()
	return start(t, []string{rediswqtest.Python(t), rediswqtest.Worker(t)}, addr, queue, env...)
}

// start starts a worker program against the front at addr.
func start(t *testing.T, argv []string, addr, queue string, env ...string) *exec.Cmd {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), append([]string{"REDIS_HOST=" + host, "REDIS_PORT=" + port, "REDIS_QUEUE=" + queue}, env...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("worker %s output:\n%s", queue, out.String())
		}
	})
	return cmd
}

// outputs returns the outputs of the job's results, sorted, failing on any
// item with two results.
func outputs(t *testing.T, c *bus.Client, id string) []string {
	t.Helper()
	results, err := c.Outputs().StoredResults(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var outs []string
	for _, r := range results {
		if seen[r.ItemID] {
			t.Fatalf("item %s has two results", r.ItemID)
		}
		seen[r.ItemID] = true
		outs = append(outs, r.Output)
	}
	slices.Sort(outs)
	return outs
}

var ctx = context.Background()

func TestAsperathosWorkerRunsUnchanged(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	items := make([]string, 40)
	want := make([]string, 40)
	for i := range items {
		items[i] = fmt.Sprintf("item-%02d", i)
		want[i] = strings.ToUpper(items[i])
	}
	job(t, c, "j1", schemas.JobSpec{}, items...)
	addr := front(t, rediswq.Config{Open: rediswq.SharedClient(c)})

	a, b := worker(t, addr, "j1"), worker(t, addr, "j1")
	for _, w := range []*exec.Cmd{a, b} {
		if err := w.Wait(); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	if got := outputs(t, c, "j1"); !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
}

func TestKilledWorkerLosesNothingAndDuplicatesNothing(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	job(t, c, "j2", schemas.JobSpec{}, "a", "b", "c")
	addr := front(t, rediswq.Config{Open: rediswq.SharedClient(c)})

	slow := worker(t, addr, "j2", "WORK_SECONDS=60", "ITEM_LEASE_SECS=1")
	bustest.Eventually(t, 10*time.Second, "the slow worker leases an item", func() bool {
		return redisCLI(t, addr, "LLEN j2:processing") == "1"
	})
	if err := slow.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = slow.Wait()
	// Its lease key (1 s) runs out, the item returns, and another worker takes it.
	if err := worker(t, addr, "j2").Wait(); err != nil {
		t.Fatalf("worker: %v", err)
	}
	if got, want := outputs(t, c, "j2"), []string{"A", "B", "C"}; !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
}

func TestWorkerErrorsBecomeDeadLettersWithTheirText(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	bustest.Run(t, c.Letters().Move)
	job(t, c, "j3", schemas.JobSpec{MaxDeliveries: 2}, "good", "bad-1")
	addr := front(t, rediswq.Config{Open: rediswq.SharedClient(c)})

	if err := worker(t, addr, "j3").Wait(); err != nil {
		t.Fatalf("worker: %v", err)
	}
	if got := outputs(t, c, "j3"); !slices.Equal(got, []string{"GOOD"}) {
		t.Fatalf("results %v, want [GOOD]", got)
	}
	var dead []*schemas.DeadLetter
	bustest.Eventually(t, 10*time.Second, "the failed item's dead letter", func() bool {
		var err error
		dead, err = c.Letters().Stored(ctx, "j3")
		return err == nil && len(dead) == 1
	})
	if d := dead[0]; d.Payload != "bad-1" || d.Reason != schemas.MaxDeliveries || d.LastError != "cannot process bad-1" || d.Deliveries != 2 {
		t.Fatalf("dead letter %+v, want bad-1 after 2 deliveries with the worker's error", d)
	}
}

// redisCLI runs commands, one per line, on one redis-cli connection and
// returns its replies, one per line.
func redisCLI(t *testing.T, addr string, commands ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is missing: run integration/scripts/ensure-tools.sh (apt-get install redis-tools)")
	}
	cmd := exec.Command("redis-cli", "-h", host, "-p", port)
	cmd.Stdin = strings.NewReader(strings.Join(commands, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli: %v\n%s", err, out)
	}
	var lines []string // without the blank line redis-cli prints after an error
	for l := range strings.Lines(string(out)) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func TestRedisCLISpeaksTheProtocol(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	job(t, c, "j4", schemas.JobSpec{}, "x", "y")
	job(t, c, "done", schemas.JobSpec{})
	if _, err := c.Jobs().Update(ctx, "done", func(r *schemas.JobRecord) (*schemas.JobRecord, error) {
		r.State = schemas.Completed
		return r, nil
	}); err != nil {
		t.Fatal(err)
	}
	addr := front(t, rediswq.Config{Open: rediswq.SharedClient(c)})
	hash := "8b0c6d9d1e2b2a0e4fa6ed0b0b6b1b3c5f4fe2ef41e7f4d2bd8e4c1a" // not an item's
	got := redisCLI(t, addr,
		"PING",
		"LLEN j4",
		"BRPOPLPUSH j4 j4:processing 1",
		"LLEN j4",
		"LLEN j4:processing",
		"LRANGE j4:processing 0 -1",
		"RPUSH j4:results done-x",
		"EXISTS j4:leased_by_session:"+hash,
		"LREM j4:processing 0 x",
		"LREM j4:processing 0 x",
		"RPUSH j4:results orphan",
		"RPOP j4",
		"BRPOPLPUSH j4 other:processing 1",
	)
	want := strings.Join([]string{
		"PONG", "2", "x", "1", "1", "x", "1", "0", "1", "0",
		"1", // a result no item waits for goes to the job's log; the list holds x's
		"ERR j4 is a list of job j4's queue, which gives its items out with BRPOPLPUSH <q> <q>:processing: its items are the job's (docs/asperathos.md)",
		"ERR items of a job's queue move from the queue to its processing list only: j4 then j4:processing",
	}, "\n")
	if got != want {
		t.Fatalf("redis-cli replies:\n%s\nwant:\n%s", got, want)
	}
	if got := outputs(t, c, "j4"); !slices.Equal(got, []string{"done-x"}) {
		t.Fatalf("results %v, want [done-x]", got)
	}

	// A finished job's queue is empty, so that its workers' loops end.
	if _, err := c.Jobs().Update(ctx, "j4", func(r *schemas.JobRecord) (*schemas.JobRecord, error) {
		r.State = schemas.Stopped
		return r, nil
	}); err != nil {
		t.Fatal(err)
	}
	// BRPOPLPUSH without a timeout returns at once (nil, a line redisCLI drops).
	if got := redisCLI(t, addr, "LLEN done", "LLEN done:processing", "BRPOPLPUSH done done:processing 0", "LLEN j4"); got != "0\n0\n0" {
		t.Errorf("a finished job's lists: %q", got)
	}
}

// tokenBus connects with each queue's job token, as pace up does when the
// bus authenticates.
func tokenBus(t *testing.T, srv *bus.Server) rediswq.Opener {
	return func(ctx context.Context, token string) (*bus.Client, func(), error) {
		c, err := bus.Connect(ctx, srv.ClientURL(), bus.WithTokenAuth(token))
		if err != nil {
			return nil, nil, err
		}
		return c, func() { _ = c.Close(context.Background()) }, nil
	}
}

func TestAuthenticatedBusOpensAQueueOnlyWithItsJobsToken(t *testing.T) {
	t.Parallel()
	a := bustest.Authenticated(t, "alice-token,alice,1\n", map[string]string{"s1": "alice", "s2": "alice"})
	for _, id := range []string{"s1", "s2"} {
		if err := a.Admin.PushItems(ctx, id, bus.Items("p", "q")); err != nil {
			t.Fatal(err)
		}
	}
	addr := front(t, rediswq.Config{Open: tokenBus(t, a.Server), Secured: true})
	token := a.Jobs.Mint("s1")

	// The unchanged worker, its queue named by its job's token.
	if err := worker(t, addr, token).Wait(); err != nil {
		t.Fatalf("worker: %v", err)
	}
	if got := outputs(t, a.Admin, "s1"); !slices.Equal(got, []string{"P", "Q"}) {
		t.Fatalf("results %v, want [P Q]", got)
	}

	forged := token[:len(token)-2] + "xx"
	got := redisCLI(t, addr,
		"LLEN s2", // by job id, without AUTH
		"LLEN "+strings.Replace(forged, "s1", "s2", 1), // another job's id under s1's MAC
		"AUTH "+token, "LLEN s2", // s1's token does not open s2
		"AUTH "+a.Jobs.Mint("s2"), "LLEN s2", "BRPOPLPUSH s2 s2:processing 1",
	)
	lines := strings.Split(got, "\n")
	if len(lines) != 7 {
		t.Fatalf("redis-cli replies:\n%s", got)
	}
	// Once authenticated as s1, "s2" is only a key of s1's own keyspace.
	for i, want := range []string{"NOAUTH", "ERR connect to the bus for job s2", "OK", "0", "OK", "2", "p"} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("reply %d: %q, want %s…", i, lines[i], want)
		}
	}
}
