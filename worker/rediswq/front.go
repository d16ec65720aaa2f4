package rediswq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/auth/natsauth"
	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// Opener connects to the bus for one queue. token is "" on an open bus,
// where one client may serve every job; otherwise it is the job's token,
// and the client must log in with it, so that the NATS server limits it to
// that job. release closes what Opener opened.
type Opener func(ctx context.Context, token string) (c *bus.Client, release func(), err error)

// SharedClient is the Opener of an open bus: c serves every queue.
func SharedClient(c *bus.Client) Opener {
	return func(context.Context, string) (*bus.Client, func(), error) { return c, func() {}, nil }
}

// Config configures a Front.
type Config struct {
	Open Opener
	// Secured requires every queue to be named by its job's token, or the
	// connection to AUTH with it; otherwise queues are named by job.
	Secured bool
	// Tick is how often leases are extended and their keys' TTLs checked
	// (default 1s).
	Tick  time.Duration
	Clock clock.WithTicker
	Log   *slog.Logger
}

// Front serves jobs' work queues over the Redis protocol.
type Front struct {
	cfg     Config
	log     *slog.Logger
	opening singleflight.Group

	mu     sync.Mutex
	queues map[string]*queue // by queue name; guarded by mu

	completed, failed, released atomic.Int64
}

// queue is one job's queue as the front serves it: the items leased through
// it, in lease order, and the connections using it.
type queue struct {
	name, job string
	client    *bus.Client
	leaser    *bus.Leaser // nil when the job was finished at open: its lists are empty
	release   func()
	users     int     // guarded by Front.mu
	held      []*held // guarded by Front.mu
}

// held is a leased item and what its worker said of it so far.
type held struct {
	lease    *bus.Lease
	payload  string
	hash     string
	by       *session  // the connection that leased it
	ttl      time.Time // the lease key's expiry; zero: no lease key
	owner    string    // the lease key's value (rediswq's session id)
	result   *string   // pushed to <q>:results
	err      string    // pushed to <q>:errors
	extended time.Time
}

// session is one client connection.
type session struct {
	id     string
	token  string            // from AUTH
	queues map[string]*queue // the queues it has used
	multi  []redcon.Command  // commands queued after MULTI
	inMult bool
	closed atomic.Bool
}

// New returns a front; serve it with Serve.
func New(cfg Config) *Front {
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Front{cfg: cfg, log: cfg.Log.With("stage", "redis"), queues: map[string]*queue{}}
}

// Serve answers Redis clients on ln until ctx ends, then returns the items
// still leased through it to their queues.
func (f *Front) Serve(ctx context.Context, ln net.Listener) error {
	var ids atomic.Int64
	srv := redcon.NewServer(ln.Addr().String(),
		func(conn redcon.Conn, cmd redcon.Command) { f.handle(ctx, conn, conn.Context().(*session), cmd) },
		func(conn redcon.Conn) bool {
			conn.SetContext(&session{id: fmt.Sprintf("redis-%d", ids.Add(1)), queues: map[string]*queue{}})
			return true
		},
		func(conn redcon.Conn, _ error) { f.closeSession(conn.Context().(*session)) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	f.log.Info("serving job queues over the Redis protocol", "addr", ln.Addr().String(), "secured", f.cfg.Secured)
	t := f.cfg.Clock.NewTicker(f.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case err := <-errc:
			f.shutdown()
			return err
		case <-ctx.Done():
			err := srv.Close()
			if serr := <-errc; err == nil {
				err = serr
			}
			f.shutdown()
			return err
		case <-t.C():
			f.tick()
		}
	}
}

// shutdown returns every held item to its queue and closes the queues.
// Connections closing meanwhile find no held item left.
func (f *Front) shutdown() {
	type item struct {
		q *queue
		h *held
	}
	var items []item
	f.mu.Lock()
	queues := f.queues
	f.queues = map[string]*queue{}
	for _, q := range queues {
		for _, h := range q.held {
			items = append(items, item{q, h})
		}
		q.held = nil
	}
	f.mu.Unlock()
	for _, it := range items {
		f.releaseHeld(it.q, it.h, "the Redis front stopped")
	}
	for _, q := range queues {
		q.release()
	}
}

// tick extends the leases whose key has not expired (or, without a key,
// whose connection is open) and returns the others' items to the queue.
func (f *Front) tick() {
	now := f.cfg.Clock.Now()
	type action struct {
		q      *queue
		h      *held
		expire bool
	}
	var todo []action
	var idle []*queue
	f.mu.Lock()
	for name, q := range f.queues {
		for _, h := range slices.Clone(q.held) {
			switch {
			case !h.ttl.IsZero() && !now.Before(h.ttl):
				q.drop(h)
				todo = append(todo, action{q, h, true})
			case now.Sub(h.extended) >= q.leaser.ItemTimeout()/3:
				h.extended = now
				todo = append(todo, action{q, h, false})
			}
		}
		if q.users == 0 && len(q.held) == 0 {
			delete(f.queues, name)
			idle = append(idle, q)
		}
	}
	f.mu.Unlock()
	for _, q := range idle {
		q.release()
	}
	for _, a := range todo {
		if a.expire {
			f.releaseHeld(a.q, a.h, "its lease key expired")
			continue
		}
		if err := a.h.lease.Extend(); err != nil {
			f.log.Warn("lease extension failed", "job", a.q.job, "item", a.h.lease.Item.ID, "err", err)
		}
	}
}

func (f *Front) releaseHeld(q *queue, h *held, why string) {
	f.released.Add(1)
	f.log.Info("item returned to the queue", "job", q.job, "item", h.lease.Item.ID, "reason", why)
	if err := h.lease.Release(); err != nil {
		f.log.Warn("release failed; the item returns when its lease runs out", "job", q.job, "item", h.lease.Item.ID, "err", err)
	}
}

// closeSession returns the items leased on a closed connection that have no
// lease key (with one, they stay leased until it expires, as in rediswq),
// and lets go of its queues.
func (f *Front) closeSession(s *session) {
	s.closed.Store(true)
	type orphan struct {
		q *queue
		h *held
	}
	var orphans []orphan
	f.mu.Lock()
	for _, q := range s.queues {
		q.users--
		for _, h := range slices.Clone(q.held) {
			if h.by == s && h.ttl.IsZero() {
				q.drop(h)
				orphans = append(orphans, orphan{q, h})
			}
		}
	}
	f.mu.Unlock()
	for _, o := range orphans {
		f.releaseHeld(o.q, o.h, "its connection closed")
	}
}

// queue returns the queue named name for s, opening it on first use.
func (f *Front) queue(ctx context.Context, s *session, name string) (*queue, error) {
	if q, ok := s.queues[name]; ok {
		return q, nil
	}
	job, token, err := f.resolve(s, name)
	if err != nil {
		return nil, err
	}
	for {
		f.mu.Lock()
		if q, ok := f.queues[name]; ok {
			q.users++
			s.queues[name] = q
			f.mu.Unlock()
			return q, nil
		}
		f.mu.Unlock()
		_, err, _ := f.opening.Do(name, func() (any, error) { return nil, f.open(ctx, name, job, token) })
		if err != nil {
			return nil, err
		}
	}
}

// open connects name's queue and registers it, with no users yet.
func (f *Front) open(ctx context.Context, name, job, token string) error {
	f.mu.Lock()
	_, ok := f.queues[name]
	f.mu.Unlock()
	if ok {
		return nil
	}
	c, release, err := f.cfg.Open(ctx, token)
	if err != nil {
		return fmt.Errorf("connect to the bus for job %s: %w", job, err)
	}
	l, err := c.Leaser(ctx, job, bus.WithWorkerID("redis-front"))
	if err != nil && !errors.Is(err, bus.ErrJobFinished) {
		release()
		return err
	}
	f.mu.Lock()
	f.queues[name] = &queue{name: name, job: job, client: c, leaser: l, release: release}
	f.mu.Unlock()
	f.log.Info("queue opened", "job", job)
	return nil
}

// resolve names the job a queue is for and the token that opens it.
func (f *Front) resolve(s *session, name string) (job, token string, err error) {
	if job, ok := natsauth.TokenJob(name); ok {
		return job, name, nil
	}
	if !schemas.ValidToken(name) {
		return "", "", fmt.Errorf("%q is not a job's queue: name it by the job's id or token (REDIS_QUEUE)", name)
	}
	if !f.cfg.Secured {
		return name, "", nil
	}
	if tj, ok := natsauth.TokenJob(s.token); ok && tj == name {
		return name, s.token, nil
	}
	return "", "", errNoAuth
}

var errNoAuth = errors.New("NOAUTH authentication required: name the queue by the job's token (REDIS_QUEUE), or AUTH with it")

// drop removes h from the queue's held items; Front.mu is held.
func (q *queue) drop(h *held) {
	q.held = slices.DeleteFunc(q.held, func(x *held) bool { return x == h })
}

// find returns the held item that matches, preferring those leased by s,
// oldest first; Front.mu is held.
func (q *queue) find(s *session, match func(*held) bool) *held {
	var other *held
	for _, h := range q.held {
		if !match(h) {
			continue
		}
		if h.by == s {
			return h
		}
		if other == nil {
			other = h
		}
	}
	return other
}
