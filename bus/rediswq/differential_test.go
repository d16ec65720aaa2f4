package rediswq_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/rediswq"
	"github.com/pace-platform/pace/bus/rediswq/rediswqtest"
	"github.com/pace-platform/pace/schemas"
)

// lease is rediswq's lease key of an item.
func lease(item string) string {
	h := sha256.Sum224([]byte(item))
	return "job:leased_by_session:" + hex.EncodeToString(h[:])
}

// TestRepliesMatchARealRedis sends the same command sequences to a real
// redis-server and to the front, and compares every reply: the published
// rediswq library's lease, complete, give-back and error paths, multi-key
// DEL of unknown keys, a client's own housekeeping, private keys of every
// type, pipelines and MULTI/EXEC.
func TestRepliesMatchARealRedis(t *testing.T) {
	t.Parallel()
	redis := rediswqtest.Server(t)

	// Asperathos loads a job's items with RPUSH, and its workers take
	// the newest first; Pace's queue is first in, first out. Loading the
	// real Redis in reverse makes both hand out x, then y, then z.
	setup := [][]string{{"RPUSH", "job", "z", "y", "x"}}
	sequences := map[string][][]string{
		"the library's lease and complete, and its empty test": {
			{"LLEN", "job"}, {"LLEN", "job:processing"},
			{"BRPOPLPUSH", "job", "job:processing", "1"},
			{"SETEX", lease("x"), "10", "session-1"},
			{"EXISTS", lease("x")}, {"TTL", lease("x")}, {"GET", lease("x")},
			{"LRANGE", "job:processing", "0", "-1"},
			{"RPUSH", "job:results", "X"},
			{"LREM", "job:processing", "0", "x"},
			{"DEL", lease("x"), "session-1"}, // complete(): the lease key and the session id
			{"LLEN", "job"}, {"LLEN", "job:processing"},
			{"LRANGE", "job:results", "0", "-1"}, {"LLEN", "job:results"},
		},
		"giving an item back, then leasing it again": {
			{"BRPOPLPUSH", "job", "job:processing", "1"},
			{"SETEX", lease("x"), "10", "session-1"},
			{"LREM", "job:processing", "0", "x"},
			{"RPUSH", "job", "x"},
			{"DEL", lease("x"), "session-1"},
			{"LLEN", "job"}, {"LLEN", "job:processing"},
			{"RPOPLPUSH", "job", "job:processing"},
			{"LMOVE", "job", "job:processing", "RIGHT", "LEFT"},
			{"LLEN", "job"}, {"LLEN", "job:processing"},
		},
		"errors are a list": {
			{"BRPOPLPUSH", "job", "job:processing", "1"},
			{"RPUSH", "job:errors", "cannot process x"},
			{"LRANGE", "job:errors", "0", "-1"}, {"LLEN", "job:errors"},
			{"RPUSH", "job:errors", "another"}, {"LINDEX", "job:errors", "-1"},
		},
		"unknown keys of every type": {
			{"DEL", "stop", "no-such-key", "another"},
			{"EXISTS", "stop"}, {"GET", "stop"}, {"TYPE", "stop"}, {"TTL", "stop"},
			{"RPUSH", "stop", "stop"}, {"EXISTS", "stop", "stop", "nope"}, {"TYPE", "stop"},
			{"GET", "stop"}, {"INCR", "stop"}, {"LRANGE", "stop", "0", "-1"},
			{"SET", "job:x:start_time", "1700000000"}, {"GET", "job:x:start_time"},
			{"SET", "job:x:start_time", "1", "NX"}, {"SET", "job:x:start_time", "2", "XX", "GET"},
			{"SETNX", "fresh", "1"}, {"SETNX", "fresh", "2"}, {"MGET", "fresh", "stop", "none"},
			{"SETEX", "t", "100", "v"}, {"TTL", "t"}, {"PTTL", "none"}, {"PERSIST", "t"}, {"TTL", "t"},
			{"EXPIRE", "t", "50"}, {"TTL", "t"}, {"EXPIRE", "none", "5"},
			{"INCR", "n"}, {"INCRBY", "n", "41"}, {"DECR", "n"}, {"DECRBY", "n", "10"}, {"GET", "n"},
			{"INCR", "job:x:start_time"}, {"SET", "bad", "x", "EX", "0"}, {"SET", "bad", "x", "BOGUS"},
			{"LPUSH", "l", "a", "b", "c"}, {"RPUSH", "l", "d"}, {"LRANGE", "l", "1", "-2"}, {"LINDEX", "l", "0"},
			{"LREM", "l", "0", "a"}, {"LPOP", "l"}, {"RPOP", "l", "5"}, {"LLEN", "l"}, {"EXISTS", "l"},
			{"RPOP", "l"}, {"LPOP", "l", "2"}, {"RPOPLPUSH", "m", "l"},
			{"RPUSH", "m", "1", "2"}, {"RPOPLPUSH", "m", "l2"}, {"LMOVE", "m", "l2", "LEFT", "RIGHT"}, {"LRANGE", "l2", "0", "-1"},
			{"UNLINK", "l2", "m", "t", "n"}, {"TYPE", "fresh"},
		},
		"a client's housekeeping": {
			{"PING"}, {"PING", "hello"}, {"ECHO", "echo"}, {"SELECT", "0"},
			{"CLIENT", "SETNAME", "worker-1"}, {"CLIENT", "GETNAME"},
			{"CLIENT", "NOSUCH"}, {"FOO", "a", "b"}, {"GET"}, {"SETEX", "k", "x", "v"},
			{"WATCH", "k"}, {"UNWATCH"},
		},
		"MULTI and EXEC": {
			{"MULTI"}, {"SET", "a", "1"}, {"INCR", "a"}, {"LPUSH", "q", "x"}, {"EXEC"},
			{"MULTI"}, {"INCR", "a"}, {"NOSUCH"}, {"EXEC"}, {"GET", "a"},
			{"MULTI"}, {"INCR", "a"}, {"DISCARD"}, {"GET", "a"}, {"EXEC"},
			{"MULTI"}, {"BRPOPLPUSH", "job", "job:processing", "1"}, {"LLEN", "job:processing"}, {"EXEC"},
		},
	}
	for name, seq := range sequences {
		t.Run(name, func(t *testing.T) {
			// Each sequence starts from the same state: a new job on
			// the front, a flushed database on Redis. Each names the
			// queue first, as a worker does: that binds the connection
			// to its job, whose keyspace holds the other keys.
			c := bustest.Client(t, bustest.Server(t))
			job(t, c, "job", schemas.JobSpec{}, "x", "y", "z")
			front := front(t, rediswq.Config{Open: rediswq.SharedClient(c)})
			seq = append([][]string{{"LLEN", "job"}}, seq...)
			got := replies(t, front, setup, seq, false)
			want := replies(t, redis, setup, seq, true)
			for i := range seq {
				if got[i] != want[i] {
					t.Errorf("%s\n  redis: %s\n  front: %s", strings.Join(seq[i], " "), want[i], got[i])
				}
			}
		})
	}
}

// replies sends a sequence on a fresh connection; on a real Redis, the
// database is emptied and set up first.
func replies(t *testing.T, addr string, setup, seq [][]string, real bool) []string {
	t.Helper()
	conn, err := rediswqtest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if real {
		for _, cmd := range append([][]string{{"FLUSHALL"}}, setup...) {
			if _, err := conn.Do(cmd...); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := make([]string, len(seq))
	for i, cmd := range seq {
		if out[i], err = conn.Do(cmd...); err != nil {
			t.Fatalf("%s: %v", strings.Join(cmd, " "), err)
		}
	}
	return out
}
