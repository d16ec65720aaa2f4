package rediswq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
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
	// Journal, when set, writes a line to a job's log: the errors its
	// workers push to <q>:errors, and the first use of each command the
	// front does not serve. Its client needs the right to publish job
	// logs, which job tokens do not carry.
	Journal func(ctx context.Context, l *schemas.LogLine) error
	// Tick is how often leases are extended, lease keys expire and
	// Redis-protocol workers announce their presence (default 1s).
	Tick  time.Duration
	Clock clock.WithTicker
	Log   *slog.Logger
}

// announceEvery is how often a Redis-protocol worker's presence is
// refreshed: within bus' presence interval (5s).
const announceEvery = 4 * time.Second

// finishedCheck is how many ticks apart an unused queue that keeps private
// keys checks whether its job is finished (its keys then go).
const finishedCheck = 30

// Front serves jobs' work queues over the Redis protocol.
type Front struct {
	cfg      Config
	log      *slog.Logger
	instance string // distinguishes this front's connections in presence
	opening  singleflight.Group

	mu     sync.Mutex
	queues map[string]*queue // by job; guarded by mu
	ticks  int               // guarded by mu

	completed, failed, released atomic.Int64
}

// queue is one job's queue as the front serves it: the items leased through
// it, in lease order, its private keys, and the connections using it.
type queue struct {
	job     string
	client  *bus.Client
	leaser  *bus.Leaser // nil when the job was finished at open: its lists are empty
	release func()

	// Guarded by Front.mu.
	users    int
	held     []*held
	keys     *keyspace
	workers  map[*session]bool // connections that leased an item: workers in presence
	recent   map[string]time.Time
	reported map[string]bool // commands already written to the job's log
}

// held is a leased item and what its worker said of it so far.
type held struct {
	lease   *bus.Lease
	payload string
	hash    string
	by      *session // the connection that leased it
	keyed   bool     // its lease key was set and has not been deleted
	result  *string  // pushed to <q>:results
	err     string   // pushed to <q>:errors
	removed bool     // LREM'd from <q>:processing: completed unless given back next
	// removedBy is the connection that removed it, which settles it.
	removedBy *session
	leased    time.Time // when the lease was taken
	extended  time.Time
	timedOut  bool // past the job's worker.timeout: no longer extended
}

// session is one client connection, bound to the job of the first queue
// it names (or of the token it authenticates with).
type session struct {
	num   int64    // CLIENT ID
	id    string   // its worker id in presence
	token string   // from AUTH
	q     *queue   // nil until bound; guarded by Front.mu once set
	names []string // what the bound queue is called on this connection
	name  string   // CLIENT SETNAME
	proto int      // the RESP version HELLO chose: 2 or 3

	removed  []*held          // LREM'd items settled by the next command; guarded by Front.mu
	putBack  map[string]int   // values RPUSHed to <q> while leased: the LREM that follows answers 1
	multi    []redcon.Command // commands queued after MULTI
	inMulti  bool
	multiErr bool      // a command queued after MULTI was refused: EXEC aborts
	announce time.Time // guarded by Front.mu
	closed   atomic.Bool
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
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &Front{cfg: cfg, log: cfg.Log.With("stage", "redis"), instance: hex.EncodeToString(b[:]), queues: map[string]*queue{}}
}

// Serve answers Redis clients on ln until ctx ends, then returns the items
// still leased through it to their queues.
func (f *Front) Serve(ctx context.Context, ln net.Listener) error {
	var ids atomic.Int64
	srv := redcon.NewServer(ln.Addr().String(),
		func(conn redcon.Conn, cmd redcon.Command) { f.handle(ctx, conn, conn.Context().(*session), cmd) },
		func(conn redcon.Conn) bool {
			n := ids.Add(1)
			conn.SetContext(&session{num: n, id: fmt.Sprintf("redis-%s-%d", f.instance, n), proto: 2, putBack: map[string]int{}})
			return true
		},
		func(conn redcon.Conn, _ error) {
			s := conn.Context().(*session)
			s.closed.Store(true)
			f.detach(ctx, s)
		})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(probed{ln}) }()
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
			f.tick(ctx)
		}
	}
}

// shutdown returns every held item to its queue and closes the queues.
// Connections closing meanwhile find no held item left.
func (f *Front) shutdown() {
	f.mu.Lock()
	queues := f.queues
	f.queues = map[string]*queue{}
	var items []*held
	for _, q := range queues {
		items = append(items, q.held...)
		q.held = nil
	}
	f.mu.Unlock()
	for _, h := range items {
		f.releaseHeld(h, "the Redis front stopped")
	}
	for _, q := range queues {
		q.release()
	}
}

// tick expires private keys, returns the items whose lease key expired,
// extends the other leases, announces the workers, and closes the queues
// no one uses.
func (f *Front) tick(ctx context.Context) {
	now := f.cfg.Clock.Now()
	var expired, extend []*held
	type timeout struct {
		q *queue
		h *held
	}
	var timedOut []timeout
	var idle, check []*queue
	type announcement struct {
		q *queue
		s *session
	}
	var announce []announcement
	f.mu.Lock()
	f.ticks++
	for job, q := range f.queues {
		q.keys.expired(now)
		for _, h := range slices.Clone(q.held) {
			switch {
			// A lease key gone otherwise than by DEL (which unkeys its
			// item): expired, whether or not a read saw it first.
			case h.keyed && !h.removed && !q.keys.exists(q.job+leasePrefix+h.hash, now):
				q.drop(h)
				expired = append(expired, h)
			case h.timedOut:
			case q.leaser.Timeout() > 0 && now.Sub(h.leased) >= q.leaser.Timeout():
				h.timedOut = true
				timedOut = append(timedOut, timeout{q, h})
			case now.Sub(h.extended) >= q.leaser.ItemTimeout()/3:
				h.extended = now
				extend = append(extend, h)
			}
		}
		for s := range q.workers {
			if now.Sub(s.announce) >= announceEvery {
				s.announce = now
				announce = append(announce, announcement{q, s})
			}
		}
		for k, at := range q.recent {
			if now.Sub(at) > q.recentFor() {
				delete(q.recent, k)
			}
		}
		switch {
		case q.users > 0 || len(q.held) > 0:
		case q.keys.empty():
			delete(f.queues, job)
			idle = append(idle, q)
		case f.ticks%finishedCheck == 0:
			check = append(check, q)
		}
	}
	f.mu.Unlock()
	for _, h := range expired {
		f.releaseHeld(h, "its lease key expired")
	}
	for _, t := range timedOut {
		f.journal(ctx, t.q, fmt.Sprintf("item %s timed out after %s: its lease is no longer extended, and it returns to the queue after item_timeout",
			t.h.lease.Item.ID, t.q.leaser.Timeout()))
	}
	for _, h := range extend {
		if err := h.lease.Extend(); err != nil {
			f.log.Warn("lease extension failed", "job", h.lease.Item.Job, "item", h.lease.Item.ID, "err", err)
		}
	}
	for _, a := range announce {
		if err := a.q.client.Workers().AnnounceReplica(ctx, a.q.job, a.s.id, now); err != nil {
			f.log.Warn("worker presence not announced", "job", a.q.job, "worker", a.s.id, "err", err)
		}
	}
	for _, q := range idle {
		q.release()
	}
	for _, q := range check {
		f.closeIfFinished(ctx, q)
	}
}

// closeIfFinished drops an unused queue's private keys once its job is
// finished or gone.
func (f *Front) closeIfFinished(ctx context.Context, q *queue) {
	rec, _, err := q.client.Jobs().Get(ctx, q.job)
	if err != nil && !errors.Is(err, bus.ErrJobNotFound) {
		return
	}
	if err == nil && !rec.State.Final() {
		return
	}
	f.mu.Lock()
	if q.users > 0 || len(q.held) > 0 || f.queues[q.job] != q {
		f.mu.Unlock()
		return
	}
	delete(f.queues, q.job)
	f.mu.Unlock()
	q.release()
}

func (f *Front) releaseHeld(h *held, why string) {
	f.released.Add(1)
	f.log.Info("item returned to the queue", "job", h.lease.Item.Job, "item", h.lease.Item.ID, "reason", why)
	if err := h.lease.Release(); err != nil {
		f.log.Warn("release failed; the item returns when its lease runs out", "job", h.lease.Item.Job, "item", h.lease.Item.ID, "err", err)
	}
}

// detach unbinds a connection from its queue, settling what it leaves:
// items it removed from the processing list are completed when they have
// a result or an error, and returned otherwise (a give-back cut short must
// not lose its item); items it leased without a lease key return to the
// queue (with one, they stay leased until it expires, as in rediswq). Its
// presence as a worker ends.
func (f *Front) detach(ctx context.Context, s *session) {
	f.mu.Lock()
	q := s.q
	if q == nil {
		f.mu.Unlock()
		return
	}
	s.q, s.names = nil, nil
	clear(s.putBack)
	q.users--
	removed := s.removed
	s.removed = nil
	for _, h := range removed {
		q.drop(h)
	}
	var orphans []*held
	for _, h := range slices.Clone(q.held) {
		if h.by == s && !h.keyed && !h.removed {
			q.drop(h)
			orphans = append(orphans, h)
		}
	}
	worker := q.workers[s]
	delete(q.workers, s)
	f.mu.Unlock()
	for _, h := range removed {
		if h.result == nil && h.err == "" {
			f.releaseHeld(h, "its connection closed before it was completed or given back")
			continue
		}
		f.settle(ctx, q, h)
	}
	for _, h := range orphans {
		f.releaseHeld(h, "its connection closed")
	}
	if worker {
		if err := q.client.Workers().WithdrawReplica(ctx, q.job, s.id); err != nil && ctx.Err() == nil {
			f.log.Warn("worker presence not withdrawn; it ages out", "job", q.job, "worker", s.id, "err", err)
		}
	}
}

// errNoJob is a key that names no job's queue on an open bus.
var errNoJob = errors.New("no job")

var errNoAuth = replyError("NOAUTH Authentication required.")

// bind ties s to the job whose queue k names, on its first use of a queue.
// It returns errNoJob on an open bus when k names no existing job, and
// errNoAuth on a secured one when k is not a job's token.
func (f *Front) bind(ctx context.Context, s *session, k string) error {
	if s.q != nil {
		return nil
	}
	name := queueName(k)
	job, token := name, ""
	if j, ok := jobOfToken(name); ok {
		job, token = j, name
	} else if f.cfg.Secured {
		return errNoAuth
	}
	if !schemas.ValidToken(job) {
		return errNoJob
	}
	return f.attach(ctx, s, job, token, []string{name})
}

// attach binds s to job's queue, opening it on first use.
func (f *Front) attach(ctx context.Context, s *session, job, token string, names []string) error {
	for {
		f.mu.Lock()
		if q, ok := f.queues[job]; ok {
			q.users++
			s.q, s.names = q, names
			f.mu.Unlock()
			return nil
		}
		f.mu.Unlock()
		if _, err, _ := f.opening.Do(job, func() (any, error) { return nil, f.open(ctx, job, token) }); err != nil {
			return err
		}
	}
}

// open connects job's queue and registers it, with no users yet. It never
// creates the job.
func (f *Front) open(ctx context.Context, job, token string) error {
	f.mu.Lock()
	_, ok := f.queues[job]
	f.mu.Unlock()
	if ok {
		return nil
	}
	c, release, err := f.cfg.Open(ctx, token)
	if err != nil {
		return fmt.Errorf("connect to the bus for job %s: %w", job, err)
	}
	l, err := c.Leaser(ctx, job, bus.WithWorkerID("redis-front"))
	switch {
	case errors.Is(err, bus.ErrJobNotFound):
		release()
		return errNoJob
	case err != nil && !errors.Is(err, bus.ErrJobFinished):
		release()
		return err
	}
	f.mu.Lock()
	f.queues[job] = &queue{job: job, client: c, leaser: l, release: release, keys: newKeyspace(),
		workers: map[*session]bool{}, recent: map[string]time.Time{}, reported: map[string]bool{}}
	f.mu.Unlock()
	f.log.Info("queue opened", "job", job)
	return nil
}

// jobOfToken returns the job a job token is for.
func jobOfToken(token string) (string, bool) { return natsauth.TokenJob(token) }

// drop removes h from the queue's held items; Front.mu is held.
func (q *queue) drop(h *held) {
	q.held = slices.DeleteFunc(q.held, func(x *held) bool { return x == h })
}

// recentFor is how long a value leased here is remembered after it left:
// a requeue of it in that time is not a new item.
func (q *queue) recentFor() time.Duration {
	if q.leaser == nil {
		return time.Minute
	}
	return 2 * q.leaser.ItemTimeout()
}

// find returns the oldest held item that matches among those s leased.
// A connection that never leased an item may be one of a pool whose
// leases went through another: it gets the oldest of any connection's.
// One that leased must not take another's item: its lease of that value
// may have expired and gone to another worker. Front.mu is held.
func (q *queue) find(s *session, match func(*held) bool) *held {
	if h := q.any(s, match); h != nil && (h.by == s || !q.workers[s]) {
		return h
	}
	return nil
}

// any returns the oldest held item that matches, preferring those s
// leased; Front.mu is held.
func (q *queue) any(s *session, match func(*held) bool) *held {
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

// journal writes a line to q's job log, when the front has a journal.
func (f *Front) journal(ctx context.Context, q *queue, line string) {
	if f.cfg.Journal == nil {
		return
	}
	l := &schemas.LogLine{Job: q.job, At: f.cfg.Clock.Now(), Source: "redis-front", Line: line}
	if err := f.cfg.Journal(ctx, l); err != nil {
		f.log.Warn("job log not written", "job", q.job, "err", err)
	}
}
