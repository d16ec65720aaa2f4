package rediswq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// foreverWait is how long one wait of a BRPOPLPUSH without a timeout lasts
// before it checks that the front is still running.
const foreverWait = 5 * time.Second

// handle answers one command. Every command writes exactly one reply, so
// that EXEC can answer with the replies of the commands it runs.
func (f *Front) handle(ctx context.Context, conn redcon.Conn, s *session, cmd redcon.Command) {
	name := strings.ToUpper(string(cmd.Args[0]))
	if s.inMult {
		switch name {
		case "EXEC":
			queued := s.multi
			s.multi, s.inMult = nil, false
			conn.WriteArray(len(queued))
			for _, c := range queued {
				f.run(ctx, conn, s, strings.ToUpper(string(c.Args[0])), c.Args[1:], false)
			}
		case "DISCARD":
			s.multi, s.inMult = nil, false
			conn.WriteString("OK")
		case "MULTI":
			conn.WriteError("ERR MULTI calls can not be nested")
		default:
			s.multi = append(s.multi, cmd)
			conn.WriteString("QUEUED")
		}
		return
	}
	switch name {
	case "MULTI":
		s.inMult = true
		conn.WriteString("OK")
	case "EXEC", "DISCARD":
		conn.WriteError("ERR " + name + " without MULTI")
	case "QUIT":
		conn.WriteString("OK")
		_ = conn.Close()
	default:
		f.run(ctx, conn, s, name, cmd.Args[1:], true)
	}
}

// run answers one command; block is false inside MULTI, where blocking
// commands return at once.
func (f *Front) run(ctx context.Context, conn redcon.Conn, s *session, name string, args [][]byte, block bool) {
	c, ok := commands[name]
	if !ok {
		conn.WriteError(fmt.Sprintf("ERR unknown command '%s': the Redis front serves the rediswq work-queue protocol only (docs/asperathos.md)", strings.ToLower(name)))
		return
	}
	if len(args) < c.min || c.max >= 0 && len(args) > c.max {
		conn.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(name)))
		return
	}
	if err := c.do(f, &call{ctx: ctx, conn: conn, s: s, name: name, args: args, block: block}); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "NOAUTH") && !strings.HasPrefix(msg, "WRONGTYPE") {
			msg = "ERR " + msg
		}
		conn.WriteError(strings.ReplaceAll(msg, "\n", " "))
	}
}

// call is one command being answered.
type call struct {
	ctx   context.Context
	conn  redcon.Conn
	s     *session
	name  string
	args  [][]byte
	block bool
}

func (c *call) arg(i int) string { return string(c.args[i]) }

// command answers one Redis command: it writes a reply, or returns the
// error to answer with.
type command struct {
	min, max int // arguments, not counting the command's name; max -1: any
	do       func(f *Front, c *call) error
}

var commands map[string]command

func init() {
	ok := func(f *Front, c *call) error { c.conn.WriteString("OK"); return nil }
	commands = map[string]command{
		"PING": {0, 1, func(f *Front, c *call) error {
			if len(c.args) == 1 {
				c.conn.WriteBulk(c.args[0])
			} else {
				c.conn.WriteString("PONG")
			}
			return nil
		}},
		"ECHO":    {1, 1, func(f *Front, c *call) error { c.conn.WriteBulk(c.args[0]); return nil }},
		"AUTH":    {1, 2, (*Front).auth},
		"SELECT":  {1, 1, ok},
		"CLIENT":  {1, -1, ok}, // SETNAME, SETINFO: accepted, not kept
		"WATCH":   {1, -1, ok},
		"UNWATCH": {0, 0, ok},
		"COMMAND": {0, -1, func(f *Front, c *call) error { c.conn.WriteArray(0); return nil }},
		"INFO": {0, -1, func(f *Front, c *call) error {
			c.conn.WriteBulkString("# Server\r\nredis_version:7.0.0\r\nredis_mode:pace-rediswq\r\n")
			return nil
		}},
		"BRPOPLPUSH": {3, 3, (*Front).popPush},
		"RPOPLPUSH":  {2, 2, (*Front).popPush},
		"BLMOVE":     {5, 5, (*Front).popPush},
		"LMOVE":      {4, 4, (*Front).popPush},
		"LLEN":       {1, 1, (*Front).llen},
		"LRANGE":     {3, 3, (*Front).lrange},
		"LREM":       {3, 3, (*Front).lrem},
		"RPUSH":      {2, -1, (*Front).push},
		"LPUSH":      {2, -1, (*Front).push},
		"SETEX":      {3, 3, (*Front).setex},
		"PSETEX":     {3, 3, (*Front).setex},
		"SET":        {2, -1, (*Front).set},
		"EXPIRE":     {2, 3, (*Front).expire},
		"PEXPIRE":    {2, 3, (*Front).expire},
		"EXISTS":     {1, -1, (*Front).exists},
		"DEL":        {1, -1, (*Front).del},
		"GET":        {1, 1, (*Front).get},
		"TTL":        {1, 1, (*Front).ttl},
		"PTTL":       {1, 1, (*Front).ttl},
	}
}

// auth keeps the connection's job token, for queues named by job; the
// queues it used are resolved again with the new credentials.
func (f *Front) auth(c *call) error {
	c.s.token = c.arg(len(c.args) - 1)
	f.mu.Lock()
	for _, q := range c.s.queues {
		q.users--
	}
	f.mu.Unlock()
	clear(c.s.queues)
	c.conn.WriteString("OK")
	return nil
}

// target parses a key and opens its queue.
func (f *Front) target(c *call, i int) (*queue, key, error) {
	k, err := parseKey(c.arg(i))
	if err != nil {
		return nil, k, err
	}
	q, err := f.queue(c.ctx, c.s, k.queue)
	return q, k, err
}

// popPush leases an item: BRPOPLPUSH <q> <q>:processing <timeout> (and
// RPOPLPUSH, LMOVE and BLMOVE from the main list to the processing list).
// The item is leased for the job's item timeout, extended while its
// connection is open or its lease key lives.
func (f *Front) popPush(c *call) error {
	q, src, err := f.target(c, 0)
	if err != nil {
		return err
	}
	dst, err := parseKey(c.arg(1))
	if err != nil {
		return err
	}
	if src.kind != mainList || dst.kind != processingList || dst.queue != src.queue {
		return fmt.Errorf("items move from a queue to its processing list only: want %s %s:processing", src.queue, src.queue)
	}
	if q.leaser == nil { // a finished job: nothing to lease
		c.conn.WriteNull()
		return nil
	}
	wait, forever := 200*time.Millisecond, false
	if n := len(c.args); n == 3 || n == 5 { // the blocking forms end with their timeout
		secs, err := strconv.ParseFloat(c.arg(n-1), 64)
		if err != nil || secs < 0 || math.IsInf(secs, 0) || math.IsNaN(secs) {
			return errors.New("timeout is not a float or out of range")
		}
		wait, forever = time.Duration(secs*float64(time.Second)), secs == 0
		if !c.block {
			wait, forever = 0, false
		}
	}
	for {
		step := wait
		if forever {
			step = foreverWait
		}
		lease, err := q.leaser.Next(c.ctx, max(step, time.Millisecond))
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

func (f *Front) hold(q *queue, s *session, lease *bus.Lease) {
	h := &held{lease: lease, payload: lease.Item.Payload, hash: itemHash(lease.Item.Payload), by: s,
		extended: f.cfg.Clock.Now()}
	f.mu.Lock()
	q.held = append(q.held, h)
	f.mu.Unlock()
}

// llen counts a queue's items: <q> the unfinished ones not leased here
// (queued, or leased through another front), <q>:processing those leased
// here. Their sum is 0 exactly when the job has nothing left to do, which
// is what a rediswq worker's loop tests.
func (f *Front) llen(c *call) error {
	q, k, err := f.target(c, 0)
	if err != nil {
		return err
	}
	f.mu.Lock()
	here := len(q.held)
	f.mu.Unlock()
	switch k.kind {
	case processingList:
		c.conn.WriteInt(here)
	case mainList:
		n, err := remaining(c.ctx, q)
		if err != nil {
			return err
		}
		c.conn.WriteInt(max(0, n-here))
	default:
		return writeOnly(k)
	}
	return nil
}

// remaining is the job's unfinished items: none when it was finished at open.
func remaining(ctx context.Context, q *queue) (int, error) {
	if q.leaser == nil {
		return 0, nil
	}
	return q.leaser.Remaining(ctx)
}

func writeOnly(k key) error {
	return fmt.Errorf("the %s list is write-only here: read a job's results and errors with Pace's API (GET /submissions/<id>/results, /errors) or pace results", map[kind]string{resultsList: "results", errorsList: "errors"}[k.kind])
}

// lrange lists the items leased here (LRANGE <q>:processing 0 -1), as
// rediswq's check for expired leases reads them.
func (f *Front) lrange(c *call) error {
	q, k, err := f.target(c, 0)
	if err != nil {
		return err
	}
	if k.kind != processingList {
		return fmt.Errorf("only %s:processing can be listed: a queue's waiting items are in its stream", k.queue)
	}
	start, err1 := strconv.Atoi(c.arg(1))
	stop, err2 := strconv.Atoi(c.arg(2))
	if err1 != nil || err2 != nil {
		return errors.New("value is not an integer or out of range")
	}
	f.mu.Lock()
	items := make([]string, 0, len(q.held))
	for _, h := range q.held {
		items = append(items, h.payload)
	}
	f.mu.Unlock()
	n := len(items)
	if start < 0 {
		start = max(0, n+start)
	}
	if stop < 0 {
		stop = n + stop
	}
	stop = min(stop, n-1)
	if start > stop {
		c.conn.WriteArray(0)
		return nil
	}
	c.conn.WriteArray(stop - start + 1)
	for _, it := range items[start : stop+1] {
		c.conn.WriteBulkString(it)
	}
	return nil
}

// lrem completes a leased item (LREM <q>:processing 0 <item>): its result
// is what its worker pushed to <q>:results, or empty. An item whose worker
// pushed an error and no result failed instead: it is retried, and
// dead-lettered with that error once its deliveries are used up.
func (f *Front) lrem(c *call) error {
	q, k, err := f.target(c, 0)
	if err != nil {
		return err
	}
	if k.kind != processingList {
		c.conn.WriteInt(0) // rediswq removes only from the processing list
		return nil
	}
	payload := c.arg(2)
	f.mu.Lock()
	h := q.find(c.s, func(h *held) bool { return h.payload == payload })
	if h != nil {
		q.drop(h)
	}
	f.mu.Unlock()
	if h == nil {
		c.conn.WriteInt(0)
		return nil
	}
	if h.result == nil && h.err != "" {
		f.failed.Add(1)
		h.lease.Fail(c.ctx, errors.New(h.err))
		c.conn.WriteInt(1)
		return nil
	}
	out := ""
	if h.result != nil {
		out = *h.result
	}
	if err := h.lease.Complete(c.ctx, out); err != nil && !errors.Is(err, bus.ErrDuplicateResult) {
		return fmt.Errorf("result of item %s not stored, the item returns to the queue: %w", h.lease.Item.ID, err)
	}
	f.completed.Add(1)
	c.conn.WriteInt(1)
	return nil
}

// push writes to a queue's lists. To <q>:results and <q>:errors it gives
// each value to the oldest item leased on this connection (or else through
// this front) that has none yet; to <q> it returns a leased item of that
// value to the queue (rediswq's requeue), or queues a new item.
func (f *Front) push(c *call) error {
	q, k, err := f.target(c, 0)
	if err != nil {
		return err
	}
	values := make([]string, 0, len(c.args)-1)
	for _, v := range c.args[1:] {
		values = append(values, string(v))
	}
	switch k.kind {
	case resultsList, errorsList:
		return f.attach(c, q, k, values)
	case mainList:
		return f.requeueOrQueue(c, q, values)
	default:
		return fmt.Errorf("%s:processing is filled by BRPOPLPUSH only", k.queue)
	}
}

func (f *Front) attach(c *call, q *queue, k key, values []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, v := range values {
		h := q.find(c.s, func(h *held) bool {
			if k.kind == resultsList {
				return h.result == nil
			}
			return h.err == ""
		})
		if h == nil {
			return fmt.Errorf("%d of %d values not stored: no leased item of %s is waiting for one (lease an item with BRPOPLPUSH first)", len(values)-i, len(values), q.job)
		}
		if k.kind == resultsList {
			h.result = &v
		} else {
			h.err = v
		}
	}
	c.conn.WriteInt(len(values))
	return nil
}

func (f *Front) requeueOrQueue(c *call, q *queue, values []string) error {
	var fresh []schemas.WorkItem
	for _, v := range values {
		f.mu.Lock()
		h := q.find(c.s, func(h *held) bool { return h.payload == v })
		if h != nil {
			q.drop(h)
		}
		f.mu.Unlock()
		if h != nil {
			f.releaseHeld(q, h, "its worker put it back")
			continue
		}
		fresh = append(fresh, schemas.WorkItem{Payload: v})
	}
	if len(fresh) > 0 {
		if err := q.client.PushItems(c.ctx, q.job, fresh); err != nil {
			return fmt.Errorf("queue %d items: %w", len(fresh), err)
		}
	}
	c.conn.WriteInt(len(values))
	return nil
}

// leaseTarget opens a lease key's queue.
func (f *Front) leaseTarget(c *call) (*queue, key, error) {
	q, k, err := f.target(c, 0)
	if err == nil && k.kind != leaseKey {
		err = fmt.Errorf("WRONGTYPE only lease keys (%s%s<sha224 of an item>) hold values here", k.queue, leasePrefix)
	}
	return q, k, err
}

// setLease sets the expiry and owner of a lease key's item; it reports false
// when no item of that hash is leased here.
func (f *Front) setLease(c *call, q *queue, k key, d time.Duration, owner *string) bool {
	now := f.cfg.Clock.Now()
	f.mu.Lock()
	h := q.find(c.s, func(h *held) bool { return h.hash == k.hash })
	if h != nil {
		h.ttl = now.Add(d)
		if owner != nil {
			h.owner = *owner
		}
		h.extended = now
	}
	f.mu.Unlock()
	if h != nil {
		if err := h.lease.Extend(); err != nil {
			f.log.Warn("lease extension failed", "job", q.job, "item", h.lease.Item.ID, "err", err)
		}
	}
	return h != nil
}

// setex gives a leased item its lease key: SETEX <q>:leased_by_session:<hash>
// <seconds> <session>. The item stays leased until the key expires, even
// if its connection closes.
func (f *Front) setex(c *call) error {
	q, k, err := f.leaseTarget(c)
	if err != nil {
		return err
	}
	d, err := duration(c.arg(1), c.name == "PSETEX")
	if err != nil {
		return err
	}
	owner := c.arg(2)
	f.setLease(c, q, k, d, &owner)
	c.conn.WriteString("OK")
	return nil
}

// set is SET <lease key> <session> EX <seconds> (or PX <ms>).
func (f *Front) set(c *call) error {
	q, k, err := f.leaseTarget(c)
	if err != nil {
		return err
	}
	if len(c.args) != 4 {
		return errors.New("SET of a lease key needs its expiry: SET key value EX seconds")
	}
	unit := strings.ToUpper(c.arg(2))
	if unit != "EX" && unit != "PX" {
		return errors.New("SET of a lease key needs its expiry: SET key value EX seconds")
	}
	d, err := duration(c.arg(3), unit == "PX")
	if err != nil {
		return err
	}
	owner := c.arg(1)
	f.setLease(c, q, k, d, &owner)
	c.conn.WriteString("OK")
	return nil
}

func (f *Front) expire(c *call) error {
	q, k, err := f.leaseTarget(c)
	if err != nil {
		return err
	}
	d, err := duration(c.arg(1), c.name == "PEXPIRE")
	if err != nil {
		return err
	}
	c.conn.WriteInt(b2i(f.setLease(c, q, k, d, nil)))
	return nil
}

// duration reads a positive count of seconds, or of milliseconds.
func duration(s string, millis bool) (time.Duration, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/int64(time.Second) {
		return 0, errors.New("invalid expire time")
	}
	if millis {
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.Duration(n) * time.Second, nil
}

// exists counts the keys that exist: a lease key while its item is leased
// here, a list while it has items.
func (f *Front) exists(c *call) error {
	n := 0
	for i := range c.args {
		q, k, err := f.target(c, i)
		if err != nil {
			return err
		}
		switch k.kind {
		case leaseKey:
			f.mu.Lock()
			n += b2i(q.find(c.s, func(h *held) bool { return h.hash == k.hash }) != nil)
			f.mu.Unlock()
		case processingList, mainList:
			f.mu.Lock()
			here := len(q.held)
			f.mu.Unlock()
			if k.kind == processingList {
				n += b2i(here > 0)
				continue
			}
			rem, err := remaining(c.ctx, q)
			if err != nil {
				return err
			}
			n += b2i(rem > here)
		}
	}
	c.conn.WriteInt(n)
	return nil
}

// del deletes lease keys: the item stays leased while its connection is
// open, as an item leased without a key. rediswq deletes the key after
// completing the item, when it is gone already.
func (f *Front) del(c *call) error {
	n := 0
	for i := range c.args {
		q, k, err := f.target(c, i)
		if err != nil {
			return err
		}
		if k.kind != leaseKey {
			return fmt.Errorf("only lease keys can be deleted: stop or delete a job through Pace's API")
		}
		f.mu.Lock()
		if h := q.find(c.s, func(h *held) bool { return h.hash == k.hash }); h != nil && !h.ttl.IsZero() {
			h.ttl, h.owner = time.Time{}, ""
			n++
		}
		f.mu.Unlock()
	}
	c.conn.WriteInt(n)
	return nil
}

// get returns a lease key's value: the session that set it.
func (f *Front) get(c *call) error {
	q, k, err := f.leaseTarget(c)
	if err != nil {
		return err
	}
	f.mu.Lock()
	h := q.find(c.s, func(h *held) bool { return h.hash == k.hash && !h.ttl.IsZero() })
	var owner string
	if h != nil {
		owner = h.owner
	}
	f.mu.Unlock()
	if h == nil {
		c.conn.WriteNull()
	} else {
		c.conn.WriteBulkString(owner)
	}
	return nil
}

// ttl is a lease key's time to live: -2 without such a key.
func (f *Front) ttl(c *call) error {
	q, k, err := f.leaseTarget(c)
	if err != nil {
		return err
	}
	f.mu.Lock()
	h := q.find(c.s, func(h *held) bool { return h.hash == k.hash && !h.ttl.IsZero() })
	var left time.Duration
	if h != nil {
		left = h.ttl.Sub(f.cfg.Clock.Now())
	}
	f.mu.Unlock()
	switch {
	case h == nil:
		c.conn.WriteInt(-2)
	case c.name == "PTTL":
		c.conn.WriteInt(int(left / time.Millisecond))
	default:
		c.conn.WriteInt(int((left + time.Second/2) / time.Second))
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
