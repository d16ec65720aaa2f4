package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// perUserBus connects to a new server and provisions it with a work stream
// per user of quota bytes.
func perUserBus(t *testing.T, ctx context.Context, quota int64) *bus.Client {
	t.Helper()
	c, err := bus.Connect(ctx, "", bus.WithServer(bustest.Server(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	if err := c.Provision(ctx, bus.Limits{QueuedBytesPerUser: quota}); err != nil {
		t.Fatal(err)
	}
	return c
}

// declareOwned declares a streaming job of owner.
func declareOwned(t *testing.T, ctx context.Context, c *bus.Client, job, owner string, maxDeliveries int) {
	t.Helper()
	spec := schemas.JobSpec{Mode: schemas.Streaming, Owner: owner, MaxDeliveries: maxDeliveries,
		ItemTimeout: schemas.Duration(time.Second)}
	if _, err := c.DeclareJob(ctx, job, spec); err != nil {
		t.Fatal(err)
	}
}

// A user's jobs share a work stream of the user's own, bounded to the
// quota: a push past it is refused whichever of the user's jobs it is for,
// while another user's pushes are accepted and worked (their results
// counted by the ledger of their stream, their failed items dead-lettered
// from it). A push to a job no stream takes is refused at once. A job that
// ends takes its subject off its stream; the stream goes once no job of its
// user takes items and it holds none, and the ledger goes on.
func TestEachUserHasAWorkStreamOfTheirOwn(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const quota, size = 64 << 10, 4 << 10
	c := perUserBus(t, ctx, quota)
	declareOwned(t, ctx, c, "a1", "alice", 0)
	declareOwned(t, ctx, c, "a2", "alice", 0)
	declareOwned(t, ctx, c, "b1", "bob", 2)
	alice, err := c.WorkStream(ctx, "alice")
	if err != nil || alice != c.Prefix().UserWorkStream("alice") {
		t.Fatalf("alice's work stream = %q, %v; want %s", alice, err, c.Prefix().UserWorkStream("alice"))
	}
	if none, err := c.WorkStream(ctx, ""); err != nil || none != "PACE_WORK" {
		t.Errorf("the work stream of no one = %q, %v; want PACE_WORK", none, err)
	}
	js := c.JetStream()
	st, err := js.Stream(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if !slices.Equal(cfg.Subjects, []string{"pace.work.a1", "pace.work.a2"}) || cfg.MaxBytes != quota {
		t.Errorf("alice's stream: subjects %v, max bytes %d; want her two jobs', %d", cfg.Subjects, cfg.MaxBytes, quota)
	}

	payload := strings.Repeat("x", size)
	bustest.FillQuota(t, quota, size, func(i int) error {
		job := []string{"a1", "a2"}[i%2]
		_, err := js.Publish(ctx, c.Prefix().Work(job), fmt.Appendf(nil, `{"id":"i%d","job":%q,"payload":%q}`, i, job, payload))
		return err
	})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = js.Publish(pctx, c.Prefix().Work("nobody"), []byte(`{"id":"x","job":"nobody","payload":"x"}`))
	cancel()
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("push to a job no stream takes: %v, want %v", err, jetstream.ErrNoStreamResponse)
	}

	bustest.KeepLedger(t, c)
	bustest.Run(t, c.Letters().Move)
	if err := c.PushItems(ctx, "b1", bus.Items("ok", "ok", "fail")); err != nil {
		t.Fatalf("bob's pushes, while alice's stream is full: %v", err)
	}
	w, err := c.Worker("b1", func(_ context.Context, it *schemas.WorkItem) (string, error) {
		if it.Payload == "fail" {
			return "", errors.New("fails")
		}
		return it.Payload, nil
	}, bus.WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	bustest.Eventually(t, time.Minute, "bob's results and dead letter", func() bool {
		rec, _, err := c.Jobs().Get(ctx, "b1")
		if err != nil {
			return false
		}
		ws, err := c.JobWork(ctx, rec)
		return err == nil && ws.Results == 2 && ws.Dead == 1 && ws.Pending+ws.InFlight == 0
	})

	if err := c.Queues().DeleteWorkConsumer(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, c.Prefix().Work("a1"), []byte(`{"id":"late","job":"a1","payload":"x"}`)); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("push to a1 after its end: %v, want %v", err, jetstream.ErrNoStreamResponse)
	}
	if err := c.Queues().ReleaseWork(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	// a1's items, if the ledger has yet to take them in, are refused as the
	// manager's sweep refuses them.
	if _, err := c.Queues().RefuseWork(ctx, alice, c.Prefix().Work("a1"), ^uint64(0), "job completed"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, alice); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("alice's stream, with no job nor item: %v; want it deleted", err)
	}
	adv, err := js.Stream(ctx, "PACE_ADVISORIES")
	if err != nil {
		t.Fatal(err)
	}
	if subjects := adv.CachedInfo().Config.Subjects; slices.ContainsFunc(subjects, func(s string) bool { return strings.Contains(s, alice) }) {
		t.Errorf("advisories stream subjects %v still list alice's deleted stream", subjects)
	}
}

// A user's work stream reserves its quota in the store: a user whose
// stream does not fit is refused their job with the store full, and the
// users who fit keep theirs.
func TestAUsersWorkStreamNeedsRoomInTheStore(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := perUserBus(t, ctx, 200<<20) // the test server's store is 1 GiB
	var refused error
	for i := range 5 {
		job, owner := fmt.Sprintf("j%d", i), fmt.Sprintf("user%d", i)
		if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: owner}); err != nil {
			refused = err
			break
		}
	}
	if !bus.StoreFull(refused) {
		t.Fatalf("declaring jobs of five users with 200 MiB each: %v; want the store full", refused)
	}
	if err := c.PushItems(ctx, "j0", bus.Items("still")); err != nil {
		t.Errorf("push to the first user's job once the store is full: %v", err)
	}
}

// Two managers' replicas that make jobs of one user at once each add the
// job's subject to the user's stream: none undoes another's (JetStream
// updates a stream's whole configuration, so the edits take turns).
func TestConcurrentEditsLoseNoJobsSubject(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := bustest.Server(t)
	var replicas []*bus.Client
	for range 2 {
		c, err := bus.Connect(ctx, "", bus.WithServer(srv))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		if err := c.Provision(ctx, bus.Limits{QueuedBytesPerUser: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, c)
	}
	declareOwned(t, ctx, replicas[0], "first", "alice", 0) // the stream made
	const each = 15
	errs := make(chan error, 2*each)
	for r, c := range replicas {
		for i := range each {
			go func() {
				_, err := c.DeclareJob(ctx, fmt.Sprintf("r%d-%d", r, i), schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice"})
				errs <- err
			}()
		}
	}
	for range 2 * each {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st, err := replicas[0].JetStream().Stream(ctx, replicas[0].Prefix().UserWorkStream("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Subjects; len(got) != 2*each+1 {
		t.Errorf("alice's stream lists %d subjects, want %d: %v", len(got), 2*each+1, got)
	}
}

// BenchmarkDeclareJob declares jobs of one user on a bus with one work
// stream for every job and on one with a stream per user, whose user
// already has listed jobs taking items: each declaration adds a subject,
// which the server checks against every subject the stream lists.
func BenchmarkDeclareJob(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		quota  int64
		listed int
	}{{"shared", 0, 0}, {"per-user/listed=10", 1 << 20, 10}, {"per-user/listed=300", 1 << 20, 300}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := bus.Connect(ctx, "", bus.WithServer(bustest.Server(b)))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx) //nolint:errcheck // the server goes with the benchmark
			if err := c.Provision(ctx, bus.Limits{QueuedBytesPerUser: bc.quota}); err != nil {
				b.Fatal(err)
			}
			spec := schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice"}
			for i := range bc.listed {
				if _, err := c.DeclareJob(ctx, fmt.Sprintf("listed-%d", i), spec); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := c.DeclareJob(ctx, fmt.Sprintf("new-%d", i), spec); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := c.Queues().DeleteWorkConsumer(ctx, fmt.Sprintf("new-%d", i)); err != nil { // the list stays as long
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
