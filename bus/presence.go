package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// Worker presence: every running Worker refreshes a key <job>.<worker> in
// the workers bucket each presenceInterval and deletes it when it stops. A
// worker not refreshed for presenceTTL is gone (killed, partitioned).
const (
	workersBucket    = schemas.BucketWorkers
	presenceInterval = 5 * time.Second
	presenceTTL      = 3 * presenceInterval
)

// presence is the value of a worker's key.
type presence struct {
	Job         string    `json:"job"`
	Worker      string    `json:"worker"`
	Concurrency int       `json:"concurrency"`
	StartedAt   time.Time `json:"started_at"`
}

// presenceKey makes a KV key of job and worker id, whose characters may be
// outside the key alphabet.
func presenceKey(job, worker string) string {
	safe := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '=' || r == '/' || r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, worker)
	return job + "." + safe
}

// announce keeps the worker's presence key fresh until ctx ends, then
// deletes it. Failures are logged: presence is advisory.
func (w *Worker) announce(ctx context.Context) {
	kv, err := w.c.js.KeyValue(ctx, w.c.prefix.Bucket(workersBucket))
	if err != nil {
		w.log.Warn("worker presence unavailable", "err", err)
		return
	}
	key := presenceKey(w.job, w.o.id)
	val, _ := json.Marshal(presence{Job: w.job, Worker: w.o.id, Concurrency: w.o.concurrency, StartedAt: w.c.clk.Now()})
	t := time.NewTicker(presenceInterval)
	defer t.Stop()
	for {
		if _, err := kv.Put(ctx, key, val); err != nil && ctx.Err() == nil {
			w.log.Warn("worker presence not refreshed", "err", err)
		}
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = kv.Delete(dctx, key)
			return
		case <-t.C:
		}
	}
}

// AnnounceReplica refreshes the presence of one replica of job that a
// runtime sees running (a pod, by its name) whether or not its worker has
// announced itself: a worker that runs in it announces the same key (its
// id is the pod's name, PACE_WORKER_ID), so the replica counts once, and a
// replica whose worker never starts still counts, as one not working. Call
// it at least every presenceInterval while the replica runs.
func (wk Workers) AnnounceReplica(ctx context.Context, job, replica string, since time.Time) error {
	c := wk.c
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(workersBucket))
	if err != nil {
		return fmt.Errorf("workers bucket: %w", err)
	}
	val, _ := json.Marshal(presence{Job: job, Worker: replica, StartedAt: since})
	if _, err := kv.Put(ctx, presenceKey(job, replica), val); err != nil {
		return fmt.Errorf("presence of %s/%s: %w", job, replica, err)
	}
	return nil
}

// WithdrawReplica deletes a replica's presence at once, rather than letting
// it age out: the replica is gone (its connection closed).
func (wk Workers) WithdrawReplica(ctx context.Context, job, replica string) error {
	c := wk.c
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(workersBucket))
	if err != nil {
		return fmt.Errorf("workers bucket: %w", err)
	}
	if err := kv.Delete(ctx, presenceKey(job, replica)); err != nil {
		return fmt.Errorf("presence of %s/%s: %w", job, replica, err)
	}
	return nil
}

// Presence is a live count of the workers running for each job, fed by the
// workers bucket. Create it with Workers.Presence and run it with Run.
type Presence struct {
	c   *Client
	clk clock.PassiveClock

	mu   sync.Mutex
	seen map[string]map[string]time.Time // job → worker key → last refresh; guarded by mu
}

// Presence returns a worker-presence view reading time from clk (the real
// clock when nil).
func (wk Workers) Presence(clk clock.PassiveClock) *Presence {
	c := wk.c
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Presence{c: c, clk: clk, seen: map[string]map[string]time.Time{}}
}

// Run follows the workers bucket until ctx ends.
func (p *Presence) Run(ctx context.Context) error {
	var kv jetstream.KeyValue
	err := RetryTemporary(ctx, p.c.log, startupBudget, "watch workers", func(ctx context.Context) (err error) {
		if kv, err = p.c.js.KeyValue(ctx, p.c.prefix.Bucket(workersBucket)); err != nil {
			return fmt.Errorf("workers bucket (was the bus provisioned?): %w", err)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for e, err := range consume.Watch(ctx, kv, ">") {
		if err != nil {
			return err
		}
		if e != nil {
			p.apply(e)
		}
	}
	return nil
}

func (p *Presence) apply(e jetstream.KeyValueEntry) {
	job, _, ok := strings.Cut(e.Key(), ".")
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(p.seen[job], e.Key())
		return
	}
	if p.seen[job] == nil {
		p.seen[job] = map[string]time.Time{}
	}
	p.seen[job][e.Key()] = e.Created()
}

// Count returns how many workers of job refreshed their presence within the
// last 15 seconds.
func (p *Presence) Count(job string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	cutoff := p.clk.Now().Add(-presenceTTL)
	n := 0
	for key, at := range p.seen[job] {
		if at.Before(cutoff) {
			delete(p.seen[job], key)
			continue
		}
		n++
	}
	return n
}
