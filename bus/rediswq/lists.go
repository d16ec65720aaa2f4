package rediswq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// foreverWait is how long one wait of a BRPOPLPUSH without a timeout lasts
// before it checks that the front is still running.
const foreverWait = 5 * time.Second

// minWait is the shortest wait for an item, also of the forms that do not
// block (RPOPLPUSH, LMOVE, a BRPOPLPUSH inside MULTI): long enough for the
// bus to hand out an item that is there.
const minWait = 200 * time.Millisecond

// popPush leases an item: BRPOPLPUSH <q> <q>:processing <timeout> (and
// RPOPLPUSH, LMOVE and BLMOVE from the main list to the processing list).
// The item is leased for the job's item timeout, extended while its
// connection is open or its lease key lives. Between private lists it
// moves a value as Redis does, without waiting.
func (f *Front) popPush(c *call) error {
	src, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	dst, _, err := f.resolve(c, 1)
	if err != nil {
		return err
	}
	fromLeft, toLeft := false, true
	if c.name == "LMOVE" || c.name == "BLMOVE" {
		var ok1, ok2 bool
		fromLeft, ok1 = side(c.arg(2))
		toLeft, ok2 = side(c.arg(3))
		if !ok1 || !ok2 {
			return replyError("ERR syntax error")
		}
	}
	wait, forever := time.Duration(0), false
	if n := len(c.args); c.name == "BRPOPLPUSH" || c.name == "BLMOVE" {
		secs, err := strconv.ParseFloat(c.arg(n-1), 64)
		if err != nil || math.IsInf(secs, 0) || math.IsNaN(secs) {
			return replyError("ERR timeout is not a float or out of range")
		}
		if secs < 0 {
			return replyError("ERR timeout is negative")
		}
		if c.block {
			wait, forever = time.Duration(secs*float64(time.Second)), secs == 0
		}
	}
	switch {
	case stored(src) && stored(dst):
		return f.move(c, q, src, dst, fromLeft, toLeft)
	case q == nil && src.kind == privateKey:
		return f.waitUnbound(c, wait, forever)
	case src.kind != mainList || dst.kind != processingList:
		return replyErrorf("ERR items of a job's queue move from the queue to its processing list only: %s then %s:processing", c.arg(0), c.arg(0))
	}
	if q.leaser == nil { // a finished job: nothing to lease
		c.conn.WriteNull()
		return nil
	}
	for {
		step := wait
		if forever {
			step = foreverWait
		}
		lease, err := q.leaser.Next(c.ctx, max(step, minWait))
		if err != nil {
			if n, rerr := q.leaser.Remaining(c.ctx); rerr == nil && n == 0 {
				c.conn.WriteNull() // the job is finished: nothing more to lease
				return nil
			}
			return err
		}
		if lease != nil {
			f.hold(q, c.s, lease)
			c.conn.WriteBulkString(lease.Item.Payload)
			return nil
		}
		if !forever || c.ctx.Err() != nil || c.s.closed.Load() {
			c.conn.WriteNull()
			return nil
		}
	}
}

// side reads LMOVE's LEFT or RIGHT.
func side(s string) (left, ok bool) {
	switch strings.ToUpper(s) {
	case "LEFT":
		return true, true
	case "RIGHT":
		return false, true
	}
	return false, false
}

// move is RPOPLPUSH or LMOVE between private lists.
func (f *Front) move(c *call, q *queue, src, dst key, fromLeft, toLeft bool) error {
	now := f.cfg.Clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	ks := space(q)
	if _, err := ks.list(dst.name, now); err != nil {
		return err
	}
	vals, err := ks.pop(src.name, 1, fromLeft, now)
	if err != nil {
		return err
	}
	if len(vals) == 0 {
		c.conn.WriteNull()
		return nil
	}
	if _, err := ks.push(dst.name, vals, toLeft, now); err != nil {
		return err
	}
	c.conn.WriteBulkString(vals[0])
	return nil
}

// waitUnbound answers a blocking pop on a connection that names no job
// yet: it waits its timeout, as Redis does on an empty list, binding to
// the job as soon as it exists.
func (f *Front) waitUnbound(c *call, wait time.Duration, forever bool) error {
	deadline := f.cfg.Clock.Now().Add(wait)
	for forever || f.cfg.Clock.Now().Before(deadline) {
		step := min(time.Second, deadline.Sub(f.cfg.Clock.Now()))
		if forever {
			step = time.Second
		}
		select {
		case <-c.ctx.Done():
			c.conn.WriteNull()
			return nil
		case <-f.cfg.Clock.After(step):
		}
		if c.s.closed.Load() {
			break
		}
		if err := f.bind(c.ctx, c.s, c.arg(0)); err == nil {
			return f.popPush(c)
		}
	}
	c.conn.WriteNull()
	return nil
}

func (f *Front) hold(q *queue, s *session, lease *bus.Lease) {
	now := f.cfg.Clock.Now()
	h := &held{lease: lease, payload: lease.Item.Payload, hash: itemHash(lease.Item.Payload), by: s,
		leased: now, extended: now}
	f.mu.Lock()
	q.held = append(q.held, h)
	if !q.workers[s] {
		q.workers[s] = true
		s.announce = time.Time{} // announced at the next tick
	}
	f.mu.Unlock()
}

// queueLen is the length of one of the queue's own lists: <q> the
// unfinished items not leased here (queued, or leased through another
// front), <q>:processing those leased here, <q>:results the results
// stored and those pushed for items still leased. <q> and <q>:processing
// sum to 0 exactly when the job has nothing left to do, which is what a
// rediswq worker's loop tests.
func (f *Front) queueLen(c *call, q *queue, k key) (int, error) {
	if q == nil {
		return 0, nil
	}
	f.mu.Lock()
	all, processing, pending := len(q.held), 0, 0
	for _, h := range q.held {
		processing += b2i(!h.removed)
		pending += b2i(h.result != nil)
	}
	f.mu.Unlock()
	switch k.kind {
	case processingList:
		return processing, nil
	case resultsList:
		n, err := q.client.Outputs().ResultCount(c.ctx, q.job)
		return n + pending, err
	default:
		if q.leaser == nil {
			return 0, nil
		}
		n, err := q.leaser.Remaining(c.ctx)
		return max(0, n-all), err
	}
}

func (f *Front) llen(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	if !stored(k) {
		n, err := f.queueLen(c, q, k)
		if err != nil {
			return err
		}
		c.conn.WriteInt(n)
		return nil
	}
	f.mu.Lock()
	l, err := space(q).list(k.name, f.cfg.Clock.Now())
	f.mu.Unlock()
	if err != nil {
		return err
	}
	c.conn.WriteInt(len(l))
	return nil
}

// values lists one of the queue's own lists: the items leased here, or
// the job's results (stored, then those pushed for items still leased).
func (f *Front) values(c *call, q *queue, k key) ([]string, error) {
	if q == nil {
		return nil, nil
	}
	var leased, pending []string
	f.mu.Lock()
	for _, h := range q.held {
		if !h.removed {
			leased = append(leased, h.payload)
		}
		if h.result != nil {
			pending = append(pending, *h.result)
		}
	}
	f.mu.Unlock()
	switch k.kind {
	case processingList:
		return leased, nil
	case resultsList:
		results, err := q.client.Outputs().StoredResults(c.ctx, q.job)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(results)+len(pending))
		for _, r := range results {
			out = append(out, r.Output)
		}
		return append(out, pending...), nil
	}
	return nil, queueKey(k, "cannot be listed: its waiting items are in the job's stream")
}

// list reads a list: a private one, or one of the queue's own (values).
func (f *Front) list(c *call, q *queue, k key) ([]string, error) {
	if !stored(k) {
		return f.values(c, q, k)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := space(q).list(k.name, f.cfg.Clock.Now())
	return slices.Clone(l), err
}

func (f *Front) lrange(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	start, err1 := strconv.Atoi(c.arg(1))
	stop, err2 := strconv.Atoi(c.arg(2))
	if err1 != nil || err2 != nil {
		return errNotInt
	}
	list, err := f.list(c, q, k)
	if err != nil {
		return err
	}
	from, to, ok := slice(len(list), start, stop)
	if !ok {
		c.conn.WriteArray(0)
		return nil
	}
	c.conn.WriteArray(to - from)
	for _, v := range list[from:to] {
		c.conn.WriteBulkString(v)
	}
	return nil
}

func (f *Front) lindex(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	i, err := strconv.Atoi(c.arg(1))
	if err != nil {
		return errNotInt
	}
	list, err := f.list(c, q, k)
	if err != nil {
		return err
	}
	if i < 0 {
		i += len(list)
	}
	if i < 0 || i >= len(list) {
		c.conn.WriteNull()
		return nil
	}
	c.conn.WriteBulkString(list[i])
	return nil
}

// lrem removes a value from a list. From <q>:processing, it removes a
// leased item. An item its worker pushed a result or an error for is
// completed with that result (or failed with that error) at once. One
// without either is completed with an empty result when the connection
// sends its next command, unless that command gives the item back (RPUSH
// <q> of it), the other way rediswq's workers end an item.
func (f *Front) lrem(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	count, err := strconv.Atoi(c.arg(1))
	if err != nil {
		return errNotInt
	}
	v := c.arg(2)
	switch {
	case stored(k):
		f.mu.Lock()
		defer f.mu.Unlock()
		ks, err := writable(q)
		if err != nil {
			if errors.Is(err, errUnbound) {
				c.conn.WriteInt(0) // no such list
				return nil
			}
			return err
		}
		n, err := ks.lrem(k.name, count, v, f.cfg.Clock.Now())
		if err != nil {
			return err
		}
		c.conn.WriteInt(n)
		return nil
	case k.kind != processingList:
		return queueKey(k, "gives items up through its processing list only")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.s.putBack[v] > 0 { // given back already: it left the list
		c.s.putBack[v]--
		if c.s.putBack[v] == 0 {
			delete(c.s.putBack, v)
		}
		c.conn.WriteInt(1)
		return nil
	}
	h := q.find(c.s, func(h *held) bool { return h.payload == v && !h.removed })
	switch {
	case h == nil:
		c.conn.WriteInt(0)
	case h.result != nil || h.err != "":
		q.drop(h)
		f.mu.Unlock()
		f.settle(c.ctx, q, h)
		f.mu.Lock()
		c.conn.WriteInt(1)
	default:
		h.removed, h.removedBy = true, c.s
		c.s.removed = append(c.s.removed, h)
		c.conn.WriteInt(1)
	}
	return nil
}

// settleRemoved settles the items the connection removed from its
// processing list, but those the command about to run gives back.
func (f *Front) settleRemoved(ctx context.Context, s *session, name string, args [][]byte) {
	f.mu.Lock()
	q := s.q
	if q == nil || len(s.removed) == 0 {
		f.mu.Unlock()
		return
	}
	keep := map[string]bool{}
	if (name == "RPUSH" || name == "LPUSH") && classify(string(args[0]), q.job, s.names).kind == mainList {
		for _, v := range args[1:] {
			keep[string(v)] = true
		}
	}
	var settle []*held
	rest := s.removed[:0]
	for _, h := range s.removed {
		if keep[h.payload] {
			rest = append(rest, h)
			continue
		}
		q.drop(h)
		settle = append(settle, h)
	}
	s.removed = rest
	f.mu.Unlock()
	for _, h := range settle {
		f.settle(ctx, q, h)
	}
}

// settle ends an item its worker removed from the processing list.
func (f *Front) settle(ctx context.Context, q *queue, h *held) {
	f.mu.Lock()
	q.recent[h.payload] = f.cfg.Clock.Now()
	f.mu.Unlock()
	if h.result == nil && h.err != "" {
		f.failed.Add(1)
		h.lease.Fail(ctx, errors.New(h.err))
		return
	}
	out := ""
	if h.result != nil {
		out = *h.result
	}
	if err := h.lease.Complete(ctx, out); err != nil && !errors.Is(err, bus.ErrDuplicateResult) {
		f.log.Warn("result not stored; the item returns to the queue", "job", q.job, "item", h.lease.Item.ID, "err", err)
		return
	}
	f.completed.Add(1)
}

// push is RPUSH and LPUSH. To <q>:results a value becomes the result of
// the oldest item leased on this connection (or else through this front)
// that has none yet; to <q>:errors it is kept in the list, written to the
// job's log, and becomes the error of such an item. To <q> it gives back
// an item removed from the processing list (one more delivery of it, as
// an attempt), takes a requeue of an item still leased or just returned
// as done already (the front returns expired items itself), and queues
// any other value as a new item of the job.
func (f *Front) push(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	values := make([]string, 0, len(c.args)-1)
	for _, v := range c.args[1:] {
		values = append(values, string(v))
	}
	switch k.kind {
	case privateKey, errorsList:
		f.mu.Lock()
		ks, err := writable(q)
		n := 0
		if err == nil {
			n, err = ks.push(k.name, values, c.name == "LPUSH", f.cfg.Clock.Now())
		}
		f.mu.Unlock()
		if err != nil {
			return err
		}
		if k.kind == errorsList {
			f.reportErrors(c, q, values)
		}
		c.conn.WriteInt(n)
		return nil
	case leaseKey:
		return errWrongType
	case resultsList:
		f.attachResults(c, q, values)
		n, err := f.queueLen(c, q, k)
		if err != nil {
			return err
		}
		c.conn.WriteInt(n)
		return nil
	case processingList:
		return queueKey(k, "is filled by BRPOPLPUSH only")
	}
	if err := f.pushMain(c, q, values); err != nil {
		return err
	}
	n, err := f.queueLen(c, q, k)
	if err != nil {
		return err
	}
	c.conn.WriteInt(n)
	return nil
}

// attachResults gives each value to an item waiting for its result; a
// value no item waits for is written to the job's log, not lost.
func (f *Front) attachResults(c *call, q *queue, values []string) {
	var stray []string
	f.mu.Lock()
	for _, v := range values {
		h := q.find(c.s, func(h *held) bool { return h.result == nil && !h.removed })
		if h == nil {
			stray = append(stray, v)
			continue
		}
		h.result = &v
	}
	f.mu.Unlock()
	for _, v := range stray {
		f.journal(c.ctx, q, "a worker pushed a result while it held no item, kept here: "+v)
	}
}

// reportErrors writes errors a worker pushed to the job's log, and makes
// each the error of an item waiting for one.
func (f *Front) reportErrors(c *call, q *queue, values []string) {
	for _, v := range values {
		f.mu.Lock()
		h := q.find(c.s, func(h *held) bool { return h.err == "" && !h.removed })
		item := ""
		if h != nil {
			h.err, item = v, " (item "+h.lease.Item.ID+")"
		}
		f.mu.Unlock()
		f.journal(c.ctx, q, "worker error"+item+": "+v)
	}
}

// pushMain gives items back to the queue and queues new ones.
func (f *Front) pushMain(c *call, q *queue, values []string) error {
	var back []*held
	var fresh []schemas.WorkItem
	f.mu.Lock()
	for _, v := range values {
		// An item removed from the processing list and not settled yet,
		// by this connection or, for clients that share a pool of
		// connections, by another.
		if h := q.any(c.s, func(h *held) bool { return h.payload == v && h.removed }); h != nil {
			r := h.removedBy
			r.removed = slices.DeleteFunc(r.removed, func(x *held) bool { return x == h })
			q.drop(h)
			back = append(back, h)
			continue
		}
		h := q.any(c.s, func(h *held) bool { return h.payload == v && !h.removed })
		_, recent := q.recent[v]
		switch {
		case h != nil && h.by == c.s: // rediswq's requeue: RPUSH, then LREM
			q.drop(h)
			back = append(back, h)
			c.s.putBack[v]++
		case h != nil || recent: // leased elsewhere, or just returned: not a new item
			c.s.putBack[v]++
		default:
			fresh = append(fresh, schemas.WorkItem{Payload: v})
		}
	}
	for _, h := range back {
		q.recent[h.payload] = f.cfg.Clock.Now()
	}
	f.mu.Unlock()
	for _, h := range back {
		f.releaseHeld(h, "its worker gave it back")
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := q.client.PushItems(c.ctx, q.job, fresh); err != nil {
		return fmt.Errorf("ERR %d new items not queued on job %s: %w", len(fresh), q.job, err)
	}
	return nil
}

// pop is RPOP and LPOP, on private lists: a job's items are leased with
// BRPOPLPUSH.
func (f *Front) pop(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	if !stored(k) {
		return queueKey(k, "gives its items out with BRPOPLPUSH <q> <q>:processing")
	}
	n, withCount := 1, len(c.args) == 2
	if withCount {
		if n, err = strconv.Atoi(c.arg(1)); err != nil || n < 0 {
			return replyError("ERR value is out of range, must be positive")
		}
	}
	f.mu.Lock()
	var vals []string
	if ks, werr := writable(q); werr == nil {
		vals, err = ks.pop(k.name, n, c.name == "LPOP", f.cfg.Clock.Now())
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	switch {
	case !withCount && len(vals) == 0:
		c.conn.WriteNull()
	case !withCount:
		c.conn.WriteBulkString(vals[0])
	case vals == nil:
		c.conn.WriteRaw([]byte("*-1\r\n"))
	default:
		c.conn.WriteArray(len(vals))
		for _, v := range vals {
			c.conn.WriteBulkString(v)
		}
	}
	return nil
}
