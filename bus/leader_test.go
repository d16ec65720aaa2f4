package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
)

// stageWork is the work of an elected stage: it counts terms and how many
// run at once, across every candidate that shares it.
type stageWork struct {
	active, most, terms atomic.Int32
}

func (s *stageWork) run(ctx context.Context) error {
	n := s.active.Add(1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	s.terms.Add(1)
	<-ctx.Done()
	s.active.Add(-1)
	return nil
}

// candidate is one replica: its own connection, candidate and context.
type candidate struct {
	c      *bus.Client
	cand   *bus.Candidate
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// leaseClient connects to s with the leases bucket's TTL set to ttl.
func leaseClient(t *testing.T, s *bus.Server, ttl time.Duration) *bus.Client {
	t.Helper()
	c := bustest.Client(t, s)
	if err := c.Provision(context.Background(), bus.Limits{LeaseTTL: ttl}); err != nil {
		t.Fatal(err)
	}
	return c
}

func startCandidate(t *testing.T, s *bus.Server, ttl time.Duration, identity string, work func(context.Context) error) *candidate {
	t.Helper()
	c := leaseClient(t, s, ttl)
	cand, err := c.Candidate("stage", identity)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &candidate{c: c, cand: cand, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- cand.Run(ctx, work) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the candidate and fails the test if Run returned an error.
func (r *candidate) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			t.Errorf("candidate: %v", err)
		}
	})
}

func leaders(cs []*candidate) (n int, leader *candidate) {
	for _, c := range cs {
		if c.cand.Leading() {
			n, leader = n+1, c
		}
	}
	return n, leader
}

func TestOneCandidateLeadsAndACleanStopHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	// Standbys retry every ttl/3 and leases expire after ttl: a takeover
	// sooner than ttl/3 after the stop was woken by the release, however slow
	// the machine is.
	const ttl = time.Hour
	work := &stageWork{}
	cs := make([]*candidate, 3)
	for i, id := range []string{"a", "b", "c"} {
		cs[i] = startCandidate(t, s, ttl, id, work.run)
	}
	bustest.Eventually(t, 10*time.Second, "a leader", func() bool { n, _ := leaders(cs); return n == 1 })
	for range 20 { // the standbys keep retrying; none may win meanwhile
		if n, _ := leaders(cs); n != 1 {
			t.Fatalf("%d leaders, want 1", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, first := leaders(cs)
	stopped := time.Now()
	first.stop(t) // releases the lease
	rest := make([]*candidate, 0, 2)
	for _, c := range cs {
		if c != first {
			rest = append(rest, c)
		}
	}
	bustest.Eventually(t, 10*time.Second, "a standby to take over a released lease", func() bool {
		n, _ := leaders(rest)
		return n == 1 && work.terms.Load() == 2
	})
	if took := time.Since(stopped); took >= ttl/3 {
		t.Errorf("takeover took %s, no sooner than a standby's periodic retry: the release did not wake it", took)
	}
	if m := work.most.Load(); m != 1 {
		t.Errorf("%d terms ran at once, want 1", m)
	}
}

func TestACrashedLeaderIsReplacedWhenItsLeaseExpires(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	const ttl = time.Second
	var crashedWorkStopped atomic.Bool
	a := startCandidate(t, s, ttl, "a", func(ctx context.Context) error {
		<-ctx.Done()
		crashedWorkStopped.Store(true)
		return nil
	})
	bustest.Eventually(t, 10*time.Second, "a leads", a.cand.Leading)
	b := startCandidate(t, s, ttl, "b", (&stageWork{}).run)

	a.c.Conn().Close() // a crash: no renewal, no release
	bustest.Eventually(t, 10*time.Second, "b to lead once a's lease expired", b.cand.Leading)
	bustest.Eventually(t, 10*time.Second, "the cut-off leader to stop its work", crashedWorkStopped.Load)
	if a.cand.Leading() {
		t.Error("a cut-off leader still leads")
	}
}

func TestALeaderWhoseLeaseIsTakenStopsItsWork(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	// Renewals every ttl/3 must not miss a whole TTL on a slow machine: a
	// spurious step-down would change the transitions counted below.
	const ttl = 5 * time.Second
	work := &stageWork{}
	a := startCandidate(t, s, ttl, "a", work.run)
	bustest.Eventually(t, 10*time.Second, "a leads", a.cand.Leading)

	kv, err := a.c.JetStream().KeyValue(context.Background(), "pace_leases")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "stage", []byte("intruder")); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, "a to stop its work", func() bool { return work.active.Load() == 0 })
	// The intruder does not renew: a leads again once its lease expires.
	bustest.Eventually(t, 10*time.Second, "a to lead again", func() bool { return work.terms.Load() == 2 && a.cand.Leading() })

	if err := kv.Delete(context.Background(), "stage"); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, "a deleted lease to end the term", func() bool { return work.terms.Load() == 3 })
	if got := a.cand.Transitions(); got != 5 { // lead, step down, lead, step down, lead
		t.Errorf("transitions = %d, want 5", got)
	}
}

func TestWorkErrorEndsRunAndReleasesTheLease(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	c := leaseClient(t, s, time.Minute)
	cand, err := c.Candidate("stage", "a")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := cand.Run(context.Background(), func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the work's error", err)
	}
	kv, err := c.JetStream().KeyValue(context.Background(), "pace_leases")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(context.Background(), "stage"); err == nil {
		t.Error("lease kept after the work failed")
	}
	if _, err := c.Candidate("a.b", "x"); !errors.Is(err, bus.ErrInvalidOption) {
		t.Errorf("Candidate(a.b) = %v, want ErrInvalidOption", err)
	}
}

// Work that fails for a while (the bus recovering) is run again in a new
// term instead of ending Run.
func TestTemporaryWorkErrorStandsByAgain(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	c := leaseClient(t, s, 3*time.Second)
	cand, err := c.Candidate("stage", "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	terms := 0
	err = cand.Run(ctx, func(context.Context) error {
		terms++
		if terms < 3 {
			return fmt.Errorf("controller consumer: %w", context.DeadlineExceeded)
		}
		return errors.New("refused")
	})
	if err == nil || err.Error() != "refused" || terms != 3 {
		t.Fatalf("Run = %v after %d terms, want the refusal in the third", err, terms)
	}
}
