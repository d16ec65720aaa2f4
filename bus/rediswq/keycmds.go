package rediswq

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// resolve binds the connection on its first key and reads key i of the
// call. q is nil when, on an open bus, the key names no job: the
// connection has no keyspace yet, so reads find nothing and writes are
// refused (errUnbound), and no job is ever created for a key.
func (f *Front) resolve(c *call, i int) (key, *queue, error) {
	if err := f.bind(c.ctx, c.s, c.arg(i)); err != nil && !errors.Is(err, errNoJob) {
		return key{}, nil, err
	}
	f.mu.Lock()
	q := c.s.q
	f.mu.Unlock()
	if q == nil {
		return key{kind: privateKey, name: c.arg(i)}, nil, nil
	}
	return classify(c.arg(i), q.job, c.s.names), q, nil
}

var errUnbound = replyError("ERR no job's queue is named on this connection yet: keys live in their job's keyspace, so name the job's queue (REDIS_QUEUE) first")

// space is the keyspace a call reads: the job's, or an empty one on an
// unbound connection. Front.mu is held.
func space(q *queue) *keyspace {
	if q == nil {
		return newKeyspace()
	}
	return q.keys
}

// writable is the keyspace a call writes: the job's. Front.mu is held.
func writable(q *queue) (*keyspace, error) {
	if q == nil {
		return nil, errUnbound
	}
	return q.keys, nil
}

// queueKey is the error for an operation a queue's own key does not take.
func queueKey(k key, what string) error {
	return replyErrorf("ERR %s is a list of job %s's queue, which %s: its items are the job's (docs/asperathos.md)", k.name, strings.SplitN(k.name, ":", 2)[0], what)
}

// stored reports whether k is kept in the job's keyspace.
func stored(k key) bool { return k.kind == privateKey || k.kind == leaseKey || k.kind == errorsList }

// keys resolves every key of the call from index from on.
func (f *Front) keys(c *call, from int) ([]key, *queue, error) {
	ks := make([]key, 0, len(c.args)-from)
	var q *queue
	for i := from; i < len(c.args); i++ {
		k, kq, err := f.resolve(c, i)
		if err != nil {
			return nil, nil, err
		}
		ks, q = append(ks, k), kq
	}
	return ks, q, nil
}

// del deletes keys (DEL, UNLINK) and counts those that existed. Deleting
// an item's lease key leaves the item leased while its connection is open,
// as one leased without a key.
func (f *Front) del(c *call) error {
	keys, q, err := f.keys(c, 0)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !stored(k) {
			return queueKey(k, "only stopping or deleting the job removes (through Pace's API)")
		}
	}
	now := f.cfg.Clock.Now()
	n := 0
	var orphans []*held
	f.mu.Lock()
	ks := space(q)
	for _, k := range keys {
		if !ks.del(k.name, now) {
			continue
		}
		n++
		if k.kind == leaseKey {
			if h := q.find(c.s, func(h *held) bool { return h.keyed && h.hash == k.hash }); h != nil {
				h.keyed = false
				if h.by.closed.Load() && !h.removed {
					q.drop(h)
					orphans = append(orphans, h)
				}
			}
		}
	}
	f.mu.Unlock()
	for _, h := range orphans {
		f.releaseHeld(h, "its lease key was deleted after its connection closed")
	}
	c.conn.WriteInt(n)
	return nil
}

// exists counts the keys that exist (a key named twice counts twice).
func (f *Front) exists(c *call) error {
	keys, q, err := f.keys(c, 0)
	if err != nil {
		return err
	}
	n := 0
	for _, k := range keys {
		if stored(k) {
			f.mu.Lock()
			n += b2i(space(q).exists(k.name, f.cfg.Clock.Now()))
			f.mu.Unlock()
			continue
		}
		l, err := f.queueLen(c, q, k)
		if err != nil {
			return err
		}
		n += b2i(l > 0)
	}
	c.conn.WriteInt(n)
	return nil
}

func (f *Front) typ(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	if stored(k) {
		f.mu.Lock()
		t := space(q).typ(k.name, f.cfg.Clock.Now())
		f.mu.Unlock()
		c.conn.WriteString(t)
		return nil
	}
	l, err := f.queueLen(c, q, k)
	if err != nil {
		return err
	}
	if l == 0 {
		c.conn.WriteString("none")
	} else {
		c.conn.WriteString("list")
	}
	return nil
}

// expire sets a key's time to live (EXPIRE, PEXPIRE); on a lease key it
// keeps the item leased that much longer.
func (f *Front) expire(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	if !stored(k) {
		return queueKey(k, "never expires")
	}
	if len(c.args) == 3 {
		return replyErrorf("ERR Unsupported option %s", c.arg(2))
	}
	n, err := strconv.ParseInt(c.arg(1), 10, 64)
	if err != nil {
		return errNotInt
	}
	d, ok := toDuration(n, c.name == "PEXPIRE")
	if !ok {
		return replyErrorf("ERR invalid expire time in '%s' command", strings.ToLower(c.name))
	}
	f.mu.Lock()
	set := space(q).expire(k.name, d, f.cfg.Clock.Now())
	f.mu.Unlock()
	if set && k.kind == leaseKey && d > 0 {
		f.keyLease(c, q, k)
	}
	c.conn.WriteInt(b2i(set))
	return nil
}

func (f *Front) persist(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	if !stored(k) {
		c.conn.WriteInt(0)
		return nil
	}
	f.mu.Lock()
	done := space(q).persist(k.name, f.cfg.Clock.Now())
	f.mu.Unlock()
	c.conn.WriteInt(b2i(done))
	return nil
}

// ttl is TTL or PTTL.
func (f *Front) ttl(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	unit := time.Second
	if c.name == "PTTL" {
		unit = time.Millisecond
	}
	if !stored(k) {
		l, err := f.queueLen(c, q, k)
		if err != nil {
			return err
		}
		c.conn.WriteInt(map[bool]int{true: -1, false: -2}[l > 0])
		return nil
	}
	f.mu.Lock()
	t := space(q).ttl(k.name, unit, f.cfg.Clock.Now())
	f.mu.Unlock()
	c.conn.WriteInt64(t)
	return nil
}

// toDuration reads a count of seconds or milliseconds as Redis does: it
// must not overflow; zero and negative counts are valid (they delete).
func toDuration(n int64, millis bool) (time.Duration, bool) {
	unit := time.Second
	if millis {
		unit = time.Millisecond
	}
	if n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

func (f *Front) get(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	if !stored(k) {
		return errWrongType
	}
	f.mu.Lock()
	v, found, err := space(q).get(k.name, f.cfg.Clock.Now())
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if !found {
		c.conn.WriteNull()
	} else {
		c.conn.WriteBulkString(v)
	}
	return nil
}

// mget reads strings; keys of other types read as nil, as in Redis.
func (f *Front) mget(c *call) error {
	keys, q, err := f.keys(c, 0)
	if err != nil {
		return err
	}
	c.conn.WriteArray(len(keys))
	now := f.cfg.Clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		v, found, err := space(q).get(k.name, now)
		if !stored(k) || err != nil || !found {
			c.conn.WriteNull()
			continue
		}
		c.conn.WriteBulkString(v)
	}
	return nil
}

// set is SET, SETEX, PSETEX and SETNX. Setting an item's lease key keeps
// the item leased until the key expires, even if its connection closes.
func (f *Front) set(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	if !stored(k) {
		return queueKey(k, "cannot be overwritten")
	}
	var opts setOptions
	var value string
	switch c.name {
	case "SETEX", "PSETEX":
		n, err := strconv.ParseInt(c.arg(1), 10, 64)
		if err != nil {
			return errNotInt
		}
		d, ok := toDuration(n, c.name == "PSETEX")
		if !ok || d <= 0 {
			return replyErrorf("ERR invalid expire time in '%s' command", strings.ToLower(c.name))
		}
		opts.ttl, value = d, c.arg(2)
	case "SETNX":
		opts.nx, value = true, c.arg(1)
	default:
		value = c.arg(1)
		if opts, err = setFlags(c.args[2:]); err != nil {
			return err
		}
	}
	f.mu.Lock()
	ks, err := writable(q)
	var done bool
	var old *string
	if err == nil {
		done, old, err = ks.set(k.name, value, opts, f.cfg.Clock.Now())
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if done && k.kind == leaseKey {
		f.keyLease(c, q, k)
	}
	switch {
	case c.name == "SETNX":
		c.conn.WriteInt(b2i(done))
	case opts.get && old != nil:
		c.conn.WriteBulkString(*old)
	case opts.get || !done:
		c.conn.WriteNull()
	default:
		c.conn.WriteString("OK")
	}
	return nil
}

// setFlags reads SET's options: NX, XX, GET, EX, PX, KEEPTTL.
func setFlags(args [][]byte) (setOptions, error) {
	var o setOptions
	syntax := replyError("ERR syntax error")
	for i := 0; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "NX":
			o.nx = true
		case "XX":
			o.xx = true
		case "GET":
			o.get = true
		case "KEEPTTL":
			o.keepTTL = true
		case "EX", "PX":
			if i+1 >= len(args) || o.ttl != 0 {
				return o, syntax
			}
			n, err := strconv.ParseInt(string(args[i+1]), 10, 64)
			if err != nil {
				return o, errNotInt
			}
			d, ok := toDuration(n, strings.EqualFold(string(args[i]), "PX"))
			if !ok || d <= 0 {
				return o, replyError("ERR invalid expire time in 'set' command")
			}
			o.ttl = d
			i++
		default:
			return o, syntax
		}
	}
	if o.nx && o.xx || o.keepTTL && o.ttl != 0 {
		return o, syntax
	}
	return o, nil
}

// keyLease ties a leased item to its lease key, just set: the item stays
// leased while the key lives.
func (f *Front) keyLease(c *call, q *queue, k key) {
	now := f.cfg.Clock.Now()
	f.mu.Lock()
	h := q.find(c.s, func(h *held) bool { return h.hash == k.hash && !h.removed })
	extend := h != nil && !h.timedOut // past worker.timeout, a lease key holds nothing more
	if h != nil {
		h.keyed, h.extended = true, now
	}
	f.mu.Unlock()
	if extend {
		if err := h.lease.Extend(); err != nil {
			f.log.Warn("lease extension failed", "job", q.job, "item", h.lease.Item.ID, "err", err)
		}
	}
}

// incr is INCR, DECR, INCRBY and DECRBY.
func (f *Front) incr(c *call) error {
	k, q, err := f.resolve(c, 0)
	if err != nil {
		return err
	}
	if !stored(k) {
		return errWrongType
	}
	n := int64(1)
	if len(c.args) == 2 {
		if n, err = strconv.ParseInt(c.arg(1), 10, 64); err != nil {
			return errNotInt
		}
	}
	if strings.HasPrefix(c.name, "DECR") {
		if n == math.MinInt64 {
			return replyError("ERR decrement would overflow")
		}
		n = -n
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ks, err := writable(q)
	if err != nil {
		return err
	}
	v, err := ks.incrBy(k.name, n, f.cfg.Clock.Now())
	if err != nil {
		return err
	}
	c.conn.WriteInt64(v)
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
