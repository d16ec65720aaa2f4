package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
)

// fetchLinger bounds how long a worker with some free slots waits for more
// to free before fetching: a quick item's round trip, negligible for slow ones.
const fetchLinger = 2 * time.Millisecond

// Handler processes one item and returns its result. An error means the item
// failed: it is retried later, and dead-lettered with the error text once
// its deliveries are used up. ctx ends when the worker gives up on the item.
type Handler func(ctx context.Context, item *schemas.WorkItem) (string, error)

// Worker takes a job's items from its queue and runs a Handler on each.
type Worker struct {
	c   *Client
	job string
	h   Handler
	o   workerOptions
	log *slog.Logger

	timeout time.Duration // the job's worker.timeout, set by Run before any item

	processed, failed, duplicates, malformed atomic.Int64
}

// errTimedOut is the cause of a handler's context cancelled by the job's
// worker.timeout.
var errTimedOut = errors.New("item timed out")

// WorkerStats counts what a Worker has done.
type WorkerStats struct {
	// Processed items have a result from this worker; Duplicates were
	// finished too late: another worker's result was kept.
	Processed, Failed, Duplicates, Malformed int64
}

// Worker returns a worker for job's items. Run it with Run.
func (c *Client) Worker(job string, h Handler, opts ...WorkerOption) (*Worker, error) {
	if !schemas.ValidToken(job) {
		return nil, fmt.Errorf("job %q: must be 1-128 letters, digits, '-' or '_'", job)
	}
	if h == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrInvalidOption)
	}
	o := defaultWorkerOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Worker{c: c, job: job, h: h, o: o, log: c.log.With("job", job, "worker", o.id)}, nil
}

// Stats returns the worker's counters. It is safe to call while Run runs.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{w.processed.Load(), w.failed.Load(), w.duplicates.Load(), w.malformed.Load()}
}

// Run processes items until ctx ends, then lets running items finish within
// the grace period, returns unfinished ones to the queue and returns nil.
// It returns ErrJobFinished when the job is finished, and an error when the
// job cannot be opened; temporary failures (a cluster electing its leaders)
// are retried for up to two minutes first.
func (w *Worker) Run(ctx context.Context) error {
	var rec *schemas.JobRecord
	err := RetryTemporary(ctx, w.log, startupBudget, "open job", func(ctx context.Context) (err error) {
		rec, err = w.c.OpenJob(ctx, w.job)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if rec.State.Final() {
		return fmt.Errorf("work on %s: %w (%s)", w.job, ErrJobFinished, rec.State)
	}
	hb := w.o.heartbeat
	if hb == 0 {
		hb = rec.Spec.ItemTimeout.D() / 3
	}
	cons, err := w.c.workConsumer(ctx, rec)
	if err != nil {
		return fmt.Errorf("work consumer for %s: %w", w.job, err)
	}
	w.timeout = rec.Spec.Worker.Timeout.D()
	if w.o.opened != nil {
		w.o.opened(rec)
	}
	w.log.Info("worker started", "concurrency", w.o.concurrency, "item_timeout", rec.Spec.ItemTimeout.D().String(),
		"timeout", w.timeout.String())

	// Handlers outlive ctx by the grace period, so they get their own context.
	hctx, stopHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHandlers()
	slots := newSlotPool(w.o.concurrency)
	var wg sync.WaitGroup
	leases := newLeases()
	if hb > 0 {
		stopBeats := leases.extendEvery(hb, w.log)
		defer stopBeats() // after the handlers, which the wait below ensures
	}
	var presence sync.WaitGroup
	presence.Go(func() { w.announce(ctx) })
	defer presence.Wait()
	settling := make(chan unsettled, w.o.concurrency)
	var settler sync.WaitGroup
	settler.Go(func() { w.settle(hctx, settling) })
	// One goroutine per slot, each taking fetched items in turn: an item
	// is fetched only for a slot taken, so one is always free to start it.
	fetched := make(chan jetstream.Msg, w.o.concurrency)
	for range w.o.concurrency {
		wg.Go(func() {
			for msg := range fetched {
				w.handle(hctx, msg, leases, settling)
				slots.release(1)
			}
		})
	}
	pause := newPause(100*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		n := slots.take(ctx, fetchLinger)
		if n == 0 {
			break
		}
		got, err := w.fetch(ctx, cons, n, func(msg jetstream.Msg) { fetched <- msg })
		slots.release(n - got)
		if err != nil {
			w.log.Warn("fetch failed", "err", err)
			pause.wait(ctx)
			continue
		}
		pause.reset()
	}

	close(fetched)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.o.grace):
		w.log.Warn("grace period over, returning running items to the queue")
		stopHandlers()
		<-done
	}
	close(settling)
	settler.Wait()
	w.log.Info("worker stopped", "processed", w.processed.Load(), "failed", w.failed.Load())
	return nil
}

// slotPool counts a worker's free slots. The fetch loop takes them (take);
// a slot's goroutine frees its own once its item is handled (release). A
// freed slot wakes the fetch loop only when it is the first free one or
// the last, so that quick items cost it two wake-ups a batch, not one each.
type slotPool struct {
	size  int64
	free  atomic.Int64
	first chan struct{} // a slot was freed while none was free
	all   chan struct{} // every slot is free
}

func newSlotPool(n int) *slotPool {
	p := &slotPool{size: int64(n), first: make(chan struct{}, 1), all: make(chan struct{}, 1)}
	p.free.Store(int64(n))
	return p
}

// release frees n slots.
func (p *slotPool) release(n int) {
	if n == 0 {
		return
	}
	free := p.free.Add(int64(n))
	if free == int64(n) {
		signal(p.first)
	}
	if free == p.size {
		signal(p.all)
	}
}

// take blocks for one free slot, then waits up to linger for every slot to
// be free, so that quick items are fetched in batches rather than one round
// trip each, and takes the free slots. It returns how many it took, 0 when
// ctx ended before one was free. A signal may be stale (sent for slots an
// earlier take took): take checks the count after each.
func (p *slotPool) take(ctx context.Context, linger time.Duration) int {
	for p.free.Load() == 0 {
		select {
		case <-p.first:
		case <-ctx.Done():
			return 0
		}
	}
	select {
	case <-p.all: // stale: every slot was free before an earlier take
	default:
	}
	if p.free.Load() < p.size {
		t := time.NewTimer(linger)
		select {
		case <-p.all:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return int(p.free.Swap(0))
}

// signal wakes whoever waits on ch, or the next to wait, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// fetch asks for up to n items, waiting at most a few seconds, and passes
// each to start. It returns how many it got; a wait that found none is not an error.
func (w *Worker) fetch(ctx context.Context, cons jetstream.Consumer, n int, start func(jetstream.Msg)) (got int, err error) {
	for msg, ferr := range consume.Fetch(ctx, cons, consume.Pull{Max: n, Wait: 5 * time.Second}) {
		if ferr != nil {
			return got, ferr
		}
		got++
		start(msg)
	}
	return got, nil
}

func (w *Worker) handle(ctx context.Context, msg jetstream.Msg, leases *leases, settling chan<- unsettled) {
	item, md, setAside := w.c.readItem(ctx, w.job, msg, w.log)
	if setAside {
		w.malformed.Add(1)
	}
	if item == nil {
		return
	}

	leases.add(msg)
	start := w.c.clk.Now()
	mctx := MessageContext(ctx, msg.Headers())
	if tracing.Enabled() {
		var span trace.Span
		mctx, span = itemSpan(mctx, msg.Subject(), schemas.WorkConsumer(w.job), w.job, item.ID, md.NumDelivered)
		defer span.End()
	}
	hctx, cancel := mctx, context.CancelFunc(func() {})
	if w.timeout > 0 {
		hctx, cancel = context.WithTimeoutCause(mctx, w.timeout, errTimedOut)
		// Past the timeout the item's lease is no longer extended: a
		// handler that ignores its context loses the item to another
		// worker after item_timeout.
		context.AfterFunc(hctx, func() {
			if errors.Is(context.Cause(hctx), errTimedOut) {
				leases.remove(msg)
			}
		})
	}
	out, herr := w.h(hctx, item)
	if errors.Is(context.Cause(hctx), errTimedOut) {
		herr = fmt.Errorf("timed out after %s (%w)", w.timeout, herr)
		w.log.Warn("item timed out", "item", item.ID, "delivery", md.NumDelivered, "timeout", w.timeout.String())
	}
	cancel()
	leases.remove(msg)

	if herr != nil {
		if tracing.Enabled() {
			tracing.Fail(trace.SpanFromContext(mctx), herr)
		}
		w.failed.Add(1)
		w.log.Debug("item failed", "item", item.ID, "delivery", md.NumDelivered, "err", herr)
		w.c.recordFailure(ctx, w.job, item.ID, herr)
		w.retry(ctx, msg, md.NumDelivered)
		return
	}
	end := w.c.clk.Now()
	res := &schemas.Result{ItemID: item.ID, Job: w.job, Output: out, Worker: w.o.id, Attempt: int(md.NumDelivered),
		Duration: schemas.Duration(end.Sub(start)), FinishedAt: end}
	stored, err := w.c.publishResultAsync(mctx, res)
	if err != nil {
		w.settled(ctx, msg, md.NumDelivered, res, err)
		return
	}
	settling <- unsettled{msg: msg, delivered: md.NumDelivered, res: res, stored: stored}
}

// unsettled is a processed item whose result is on its way to the stream.
type unsettled struct {
	msg       jetstream.Msg
	delivered uint64
	res       *schemas.Result
	stored    jetstream.PubAckFuture
}

// resultWait bounds the wait for the server's answer to a result, counted
// in ticks of resultTick: one ticker serves every result, where a timer
// reset per result would cost each a trip through the runtime's timers.
const (
	resultWait = 30 * time.Second
	resultTick = time.Second
)

// settle waits, in order, for the server's answer to each result sent and
// settles its item, until settling is closed. Results are sent without
// waiting, so a slot is free for the next item while the server stores the
// last one's result: the worker keeps many results in flight with few slots.
func (w *Worker) settle(ctx context.Context, settling <-chan unsettled) {
	tick := time.NewTicker(resultTick)
	defer tick.Stop()
	for u := range settling {
		w.settled(ctx, u.msg, u.delivered, u.res, awaitStored(u, tick.C))
	}
}

// awaitStored waits for the server's answer to u's result, for up to
// resultWait: the first tick may come at once, so the wait lasts between
// resultWait-resultTick and resultWait.
func awaitStored(u unsettled, tick <-chan time.Time) error {
	for ticks := 0; ticks < int(resultWait/resultTick); {
		select {
		case ack := <-u.stored.Ok():
			return resultStored(u.res, ack, nil)
		case err := <-u.stored.Err():
			return resultStored(u.res, nil, err)
		case <-tick:
			ticks++
		}
	}
	return fmt.Errorf("publish result %s/%s: no answer within %s", u.res.Job, u.res.ItemID, resultWait)
}

// settled acknowledges an item whose result is stored (by this worker, or
// by another before it), and returns it to the queue when storing failed.
func (w *Worker) settled(ctx context.Context, msg jetstream.Msg, delivered uint64, res *schemas.Result, err error) {
	switch {
	case errors.Is(err, ErrDuplicateResult):
		w.duplicates.Add(1)
		w.log.Debug("late result discarded: the item already has one", "item", res.ItemID, "delivery", delivered)
	case err != nil:
		w.log.Warn("result not stored, item will be retried", "item", res.ItemID, "delivery", delivered, "err", err)
		w.retry(ctx, msg, delivered)
		return
	default:
		w.processed.Add(1)
	}
	if err := msg.Ack(); err != nil {
		w.log.Warn("ack failed; the item will be redelivered and its result deduplicated",
			"item", res.ItemID, "delivery", delivered, "err", err)
	}
}

// retry returns msg to the queue: at once when the worker is stopping,
// otherwise after an exponential delay.
func (w *Worker) retry(ctx context.Context, msg jetstream.Msg, delivered uint64) {
	var err error
	if ctx.Err() != nil {
		err = msg.Nak()
	} else {
		err = msg.NakWithDelay(retryDelay(w.o.retryDelay, w.o.maxRetryDelay, delivered))
	}
	if err != nil {
		w.log.Warn("nak failed; the item returns when its lease expires", "err", err)
	}
}

// retryDelay is base·2^(delivered-1), capped at max.
func retryDelay(base, max time.Duration, delivered uint64) time.Duration {
	d := base
	for i := uint64(1); i < delivered && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
