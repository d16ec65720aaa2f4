package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// Leader election. A stage that must run once per installation elects one
// of its replicas with a lease: the key <stage> of the leases bucket, whose
// value is the holder's identity. A candidate becomes leader by creating the
// key, and stays leader by updating it with the revision it last wrote every
// third of the bucket's TTL (Limits.LeaseTTL). A lease that is not renewed
// expires with the TTL and another candidate creates the key again.
//
// A leader steps down, cancelling its work, as soon as a renewal finds a
// revision it did not write (the lease was deleted or taken) or when its
// renewals have failed for a whole TTL, measured from before its last
// successful write was sent, so it stops no later than the lease could
// expire on the server. Standbys retry the create every third of the TTL and
// at once when they see the key deleted, which a leader does on a clean
// shutdown.

// Candidate takes part in the election of one stage's leader. Create it with
// Client.Candidate and run it with Run.
type Candidate struct {
	c        *Client
	key      string
	identity string
	log      *slog.Logger
	leading  atomic.Bool
	changes  atomic.Int64
}

// Candidate returns a candidate for the leadership of name (a stage name:
// letters, digits, '-', '_') that identifies itself as identity (unique per
// process, e.g. the pod name).
func (c *Client) Candidate(name, identity string) (*Candidate, error) {
	if !schemas.ValidToken(name) {
		return nil, fmt.Errorf("%w: leader election name %q: want letters, digits, '-' or '_'", ErrInvalidOption, name)
	}
	if identity == "" {
		return nil, fmt.Errorf("%w: leader election %s: empty identity", ErrInvalidOption, name)
	}
	return &Candidate{c: c, key: name, identity: identity,
		log: c.log.With("election", name)}, nil
}

// Leading reports whether the candidate holds the lease and runs its work.
func (cd *Candidate) Leading() bool { return cd.leading.Load() }

// Transitions counts the times the candidate became leader or stepped down.
func (cd *Candidate) Transitions() int64 { return cd.changes.Load() }

// Run takes part in the election until ctx ends. Each time the candidate
// becomes leader it runs work with a context that is cancelled when it loses
// the lease, waits for work to return and stands by again. When ctx ends it
// stops work and releases the lease, so that a standby takes over at once.
// If work returns by itself, Run releases the lease and returns work's
// error, unless the error is Temporary: then it stands by again. Cancellation
// of ctx returns nil.
func (cd *Candidate) Run(ctx context.Context, work func(context.Context) error) error {
	// A stage starting while the cluster recovers (a server restarting, a
	// stream electing its leader) waits for the bucket, as for the rest of
	// its start-up calls.
	var kv jetstream.KeyValue
	var st jetstream.KeyValueStatus
	err := RetryTemporary(ctx, cd.log, startupBudget, "open the leases bucket", func(ctx context.Context) (err error) {
		if kv, err = cd.c.js.KeyValue(ctx, cd.c.prefix.Bucket(leasesBucket)); err != nil {
			return fmt.Errorf("leases bucket: %w (is the bus provisioned?)", err)
		}
		st, err = kv.Status(ctx)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("leader election %s: %w", cd.key, err)
	}
	ttl := st.TTL()
	if ttl <= 0 {
		return fmt.Errorf("leader election %s: bucket %s has no TTL", cd.key, st.Bucket())
	}
	for {
		rev, since, err := cd.acquire(ctx, kv, ttl)
		if err != nil || ctx.Err() != nil {
			return err
		}
		lost, err := cd.lead(ctx, kv, ttl, rev, since, work)
		if !lost {
			return err
		}
	}
}

// acquire blocks until the candidate creates the lease key, and returns its
// revision and the time before the create was sent. It returns a zero
// revision and no error when ctx ends.
func (cd *Candidate) acquire(ctx context.Context, kv jetstream.KeyValue, ttl time.Duration) (uint64, time.Time, error) {
	// Deletions of the key (a leader's release) wake the standby at once.
	released := make(chan struct{}, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for e, err := range consume.Watch(wctx, kv, cd.key, jetstream.UpdatesOnly()) {
			switch {
			case err != nil:
				cd.log.Warn("lease not watched, polling only", "err", err)
			case e != nil && e.Operation() != jetstream.KeyValuePut:
				select {
				case released <- struct{}{}:
				default:
				}
			}
		}
	}()
	t := cd.c.clk.NewTicker(ttl / 3)
	defer t.Stop()
	holder := ""
	for {
		start := cd.c.clk.Now()
		rctx, cancel := context.WithTimeout(ctx, ttl/3)
		rev, err := kv.Create(rctx, cd.key, []byte(cd.identity))
		cancel()
		switch {
		case err == nil:
			return rev, start, nil
		case ctx.Err() != nil:
			return 0, time.Time{}, nil
		case errors.Is(err, jetstream.ErrKeyExists):
			if e, gerr := kv.Get(ctx, cd.key); gerr == nil && string(e.Value()) != holder {
				holder = string(e.Value())
				cd.log.Info("standing by", "leader", holder)
			}
		default:
			cd.log.Warn("lease not acquired, retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return 0, time.Time{}, nil
		case <-t.C():
		case <-released:
		}
	}
}

// lead runs work while the lease held at revision rev, written at since, is
// renewed. lost reports that the lease was lost (work was stopped and the
// candidate should stand by again); otherwise the candidate released the
// lease and err is work's error.
func (cd *Candidate) lead(ctx context.Context, kv jetstream.KeyValue, ttl time.Duration, rev uint64, since time.Time,
	work func(context.Context) error) (lost bool, err error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	cd.setLeading(true)
	cd.log.Info("leading")
	go func() { done <- work(wctx) }()
	stepDown := func() error {
		stop()
		err := <-done
		cd.setLeading(false)
		return err
	}
	renew := cd.c.clk.NewTicker(ttl / 3)
	defer renew.Stop()
	expire := cd.c.clk.NewTimer(cd.until(since.Add(ttl)))
	defer expire.Stop()
	for {
		select {
		case err := <-done: // work ended by itself
			cd.setLeading(false)
			cd.release(ctx, kv, rev)
			if !Temporary(err) || ctx.Err() != nil {
				return false, err
			}
			// A bus that is recovering (a restarted server, a cluster
			// electing leaders) fails work for a while: stand by again,
			// leaving the lease to another replica for a third of its TTL.
			cd.log.Warn("work failed for a while, standing by again", "err", err)
			select {
			case <-ctx.Done():
			case <-cd.c.clk.After(ttl / 3):
			}
			return true, nil
		case <-ctx.Done():
			err := stepDown()
			cd.release(ctx, kv, rev)
			return false, err
		case <-expire.C():
			cd.log.Warn("lost leadership: the lease was not renewed within its TTL", "ttl", ttl)
		case <-renew.C():
			start := cd.c.clk.Now()
			rctx, cancel := context.WithTimeout(ctx, min(cd.until(since.Add(ttl)), ttl/3))
			next, err := kv.Update(rctx, cd.key, []byte(cd.identity), rev)
			cancel()
			switch {
			case err == nil:
				rev, since = next, start
				expire.Reset(cd.until(since.Add(ttl)))
				continue
			case ctx.Err() != nil:
				continue // shutting down: the next pass stops work and releases
			case !errors.Is(err, jetstream.ErrKeyRevisionMismatch):
				cd.log.Warn("lease not renewed, retrying", "expires_in", cd.until(since.Add(ttl)).Round(time.Millisecond), "err", err)
				continue // the expiry timer steps down if this lasts
			}
			cd.log.Warn("lost leadership: the lease was taken or deleted", "err", err)
		}
		if werr := stepDown(); werr != nil {
			cd.log.Warn("work stopped with an error after losing leadership", "err", werr)
		}
		return true, nil
	}
}

// release deletes the lease if it is still at rev, so a standby need not wait
// for it to expire.
func (cd *Candidate) release(ctx context.Context, kv jetstream.KeyValue, rev uint64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := kv.Delete(rctx, cd.key, jetstream.LastRevision(rev)); err != nil {
		cd.log.Warn("lease not released; a standby takes over when it expires", "err", err)
		return
	}
	cd.log.Info("released leadership")
}

// until is how long from now (the client's clock) to t.
func (cd *Candidate) until(t time.Time) time.Duration { return t.Sub(cd.c.clk.Now()) }

func (cd *Candidate) setLeading(v bool) {
	if cd.leading.Swap(v) != v {
		cd.changes.Add(1)
	}
}
