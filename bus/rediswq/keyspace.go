package rediswq

import (
	"strconv"
	"time"
)

// Limits of a job's private keyspace. A client that would exceed them gets
// Redis' own answer to a full server (errOOM); what it stored stays.
const (
	maxPrivateKeys  = 4096
	maxPrivateBytes = 1 << 20
)

var (
	errWrongType = replyError("WRONGTYPE Operation against a key holding the wrong kind of value")
	errOOM       = replyError("OOM command not allowed when used memory > 'maxmemory'.")
	errNotInt    = replyError("ERR value is not an integer or out of range")
)

// keyspace is a job's private keys: what Redis clients store beside the
// queue (rediswq's lease keys, a stop flag, per-item timings, the errors
// list), with Redis' types and expiry, bounded in keys and bytes, and gone
// with the job. It is not safe for concurrent use: the Front guards it.
type keyspace struct {
	keys  map[string]*entry
	bytes int
}

// entry is one key: a string when list is nil and str is set, else a list.
type entry struct {
	str     string
	list    []string
	isList  bool
	expires time.Time // zero: no expiry
}

func newKeyspace() *keyspace { return &keyspace{keys: map[string]*entry{}} }

func (e *entry) size(key string) int {
	n := len(key) + len(e.str)
	for _, v := range e.list {
		n += len(v)
	}
	return n
}

// live returns key's entry unless it is absent or expired at now (an
// expired key is removed, as Redis does on access).
func (ks *keyspace) live(key string, now time.Time) *entry {
	e := ks.keys[key]
	if e != nil && !e.expires.IsZero() && !now.Before(e.expires) {
		ks.remove(key)
		return nil
	}
	return e
}

func (ks *keyspace) remove(key string) {
	if e := ks.keys[key]; e != nil {
		ks.bytes -= e.size(key)
		delete(ks.keys, key)
	}
}

// put stores e under key, refusing it when the keyspace would outgrow its
// limits; an empty list removes the key, as in Redis.
func (ks *keyspace) put(key string, e *entry) error {
	old := ks.keys[key]
	before := 0
	if old != nil {
		before = old.size(key)
	}
	if e.isList && len(e.list) == 0 {
		ks.remove(key)
		return nil
	}
	after := e.size(key)
	if old == nil && len(ks.keys) >= maxPrivateKeys || ks.bytes-before+after > maxPrivateBytes {
		return errOOM
	}
	ks.keys[key] = e
	ks.bytes += after - before
	return nil
}

// expired removes the keys that have expired at now and returns them.
func (ks *keyspace) expired(now time.Time) []string {
	var gone []string
	for k, e := range ks.keys {
		if !e.expires.IsZero() && !now.Before(e.expires) {
			ks.remove(k)
			gone = append(gone, k)
		}
	}
	return gone
}

func (ks *keyspace) empty() bool { return len(ks.keys) == 0 }

// del removes key, reporting whether it existed.
func (ks *keyspace) del(key string, now time.Time) bool {
	if ks.live(key, now) == nil {
		return false
	}
	ks.remove(key)
	return true
}

func (ks *keyspace) exists(key string, now time.Time) bool { return ks.live(key, now) != nil }

// typ is TYPE's answer.
func (ks *keyspace) typ(key string, now time.Time) string {
	switch e := ks.live(key, now); {
	case e == nil:
		return "none"
	case e.isList:
		return "list"
	default:
		return "string"
	}
}

// get returns a string key's value; ok is false when there is none.
func (ks *keyspace) get(key string, now time.Time) (v string, ok bool, err error) {
	e := ks.live(key, now)
	if e == nil {
		return "", false, nil
	}
	if e.isList {
		return "", false, errWrongType
	}
	return e.str, true, nil
}

// setOptions are SET's flags.
type setOptions struct {
	ttl     time.Duration // 0: none
	nx, xx  bool
	keepTTL bool
	get     bool
}

// set stores a string, as SET with opts does; it reports whether it was
// stored, and the old value when opts.get asks for it.
func (ks *keyspace) set(key, v string, opts setOptions, now time.Time) (stored bool, old *string, err error) {
	e := ks.live(key, now)
	if opts.get && e != nil {
		if e.isList {
			return false, nil, errWrongType
		}
		s := e.str
		old = &s
	}
	if opts.nx && e != nil || opts.xx && e == nil {
		return false, old, nil
	}
	ne := &entry{str: v}
	switch {
	case opts.ttl > 0:
		ne.expires = now.Add(opts.ttl)
	case opts.keepTTL && e != nil:
		ne.expires = e.expires
	}
	if err := ks.put(key, ne); err != nil {
		return false, nil, err
	}
	return true, old, nil
}

// incrBy adds n to an integer string key (0 when absent).
func (ks *keyspace) incrBy(key string, n int64, now time.Time) (int64, error) {
	e := ks.live(key, now)
	var cur int64
	ne := &entry{}
	if e != nil {
		if e.isList {
			return 0, errWrongType
		}
		v, err := strconv.ParseInt(e.str, 10, 64)
		if err != nil {
			return 0, errNotInt
		}
		cur, ne.expires = v, e.expires
	}
	if n > 0 && cur > (1<<63-1)-n || n < 0 && cur < (-1<<63)-n {
		return 0, replyError("ERR increment or decrement would overflow")
	}
	cur += n
	ne.str = strconv.FormatInt(cur, 10)
	return cur, ks.put(key, ne)
}

// list returns key's list for reading: nil when absent.
func (ks *keyspace) list(key string, now time.Time) ([]string, error) {
	e := ks.live(key, now)
	if e == nil {
		return nil, nil
	}
	if !e.isList {
		return nil, errWrongType
	}
	return e.list, nil
}

// push appends (or, left, prepends one by one) values to a list and
// returns its new length.
func (ks *keyspace) push(key string, values []string, left bool, now time.Time) (int, error) {
	e := ks.live(key, now)
	if e != nil && !e.isList {
		return 0, errWrongType
	}
	ne := &entry{isList: true}
	if e != nil {
		ne.list, ne.expires = e.list, e.expires
	}
	list := make([]string, 0, len(ne.list)+len(values))
	if left {
		for i := len(values) - 1; i >= 0; i-- {
			list = append(list, values[i])
		}
		list = append(list, ne.list...)
	} else {
		list = append(append(list, ne.list...), values...)
	}
	ne.list = list
	if err := ks.put(key, ne); err != nil {
		return 0, err
	}
	return len(list), nil
}

// pop removes up to n values from a list's head (left) or tail.
func (ks *keyspace) pop(key string, n int, left bool, now time.Time) ([]string, error) {
	l, err := ks.list(key, now)
	if err != nil || l == nil {
		return nil, err
	}
	n = min(n, len(l))
	var out, rest []string
	if left {
		out, rest = append([]string(nil), l[:n]...), l[n:]
	} else {
		for i := len(l) - 1; i >= len(l)-n; i-- {
			out = append(out, l[i])
		}
		rest = l[:len(l)-n]
	}
	e := ks.keys[key]
	return out, ks.put(key, &entry{isList: true, list: append([]string(nil), rest...), expires: e.expires})
}

// lrem removes count occurrences of v (all when 0, from the tail when
// negative) and returns how many it removed.
func (ks *keyspace) lrem(key string, count int, v string, now time.Time) (int, error) {
	l, err := ks.list(key, now)
	if err != nil || l == nil {
		return 0, err
	}
	keep := make([]string, len(l))
	copy(keep, l)
	removed := 0
	matchAt := func(i int) bool {
		if keep[i] != v || count != 0 && removed >= abs(count) {
			return false
		}
		removed++
		return true
	}
	drop := make([]bool, len(keep))
	if count < 0 {
		for i := len(keep) - 1; i >= 0; i-- {
			drop[i] = matchAt(i)
		}
	} else {
		for i := range keep {
			drop[i] = matchAt(i)
		}
	}
	out := keep[:0]
	for i, x := range keep {
		if !drop[i] {
			out = append(out, x)
		}
	}
	e := ks.keys[key]
	return removed, ks.put(key, &entry{isList: true, list: out, expires: e.expires})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// expire sets key's time to live, reporting whether the key exists; a
// non-positive ttl deletes it, as in Redis.
func (ks *keyspace) expire(key string, ttl time.Duration, now time.Time) bool {
	e := ks.live(key, now)
	if e == nil {
		return false
	}
	if ttl <= 0 {
		ks.remove(key)
		return true
	}
	e.expires = now.Add(ttl)
	return true
}

// persist removes key's expiry, reporting whether it had one.
func (ks *keyspace) persist(key string, now time.Time) bool {
	e := ks.live(key, now)
	if e == nil || e.expires.IsZero() {
		return false
	}
	e.expires = time.Time{}
	return true
}

// ttl is TTL's answer in d: -2 for no key, -1 for no expiry (as counts of
// d), else the time left rounded as Redis does (to the nearest unit).
func (ks *keyspace) ttl(key string, d time.Duration, now time.Time) int64 {
	e := ks.live(key, now)
	switch {
	case e == nil:
		return -2
	case e.expires.IsZero():
		return -1
	}
	return int64((e.expires.Sub(now) + d/2) / d)
}

// slice is LRANGE's window of a list of n values: Redis' negative indexes
// and clamping; ok is false for an empty window.
func slice(n, start, stop int) (from, to int, ok bool) {
	if start < 0 {
		start = max(0, n+start)
	}
	if stop < 0 {
		stop = n + stop
	}
	stop = min(stop, n-1)
	if start > stop || start >= n {
		return 0, 0, false
	}
	return start, stop + 1, true
}
