// Command goredis-worker is an Asperathos-style worker in Go: it takes its
// job's items from Redis with the command sequence of the published
// rediswq library (BRPOPLPUSH, a lease key with a TTL, the result pushed,
// LREM, then DEL of the lease key and the session id), on the go-redis
// client. On Pace it talks to the Redis front (docs/asperathos.md), which
// Pace points it at through REDIS_HOST, REDIS_PORT and REDIS_QUEUE.
//
// Each item is upper-cased after WORK_SECONDS of "work"; items starting
// with "bad" fail (an error pushed to <queue>:errors). CONCURRENCY
// goroutines share one client, each on a connection of its own (Client.Conn):
// rediswq pairs a pushed result with the item by the connection that
// leased it, as a single-threaded rediswq worker has one. With
// GIVE_BACK=1 every item is given back once (LREM, RPUSH, DEL) before it
// is done.
//
//	REDIS_HOST=127.0.0.1 REDIS_PORT=6380 REDIS_QUEUE=<job> goredis-worker
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// queue is a Redis list used as a work queue with leases, as rediswq uses it.
type queue struct {
	db                    redis.Cmdable
	main, processing, pfx string
	session               string
	leaseFor              time.Duration
}

func (q *queue) leaseKey(item string) string {
	h := sha256.Sum224([]byte(item))
	return q.pfx + hex.EncodeToString(h[:])
}

func (q *queue) empty(ctx context.Context) (bool, error) {
	m, err := q.db.LLen(ctx, q.main).Result()
	if err != nil {
		return false, err
	}
	p, err := q.db.LLen(ctx, q.processing).Result()
	return m == 0 && p == 0, err
}

// lease takes an item, or returns "" after timeout.
func (q *queue) lease(ctx context.Context, timeout time.Duration) (string, error) {
	item, err := q.db.BRPopLPush(ctx, q.main, q.processing, timeout).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return item, q.db.SetEx(ctx, q.leaseKey(item), q.session, q.leaseFor).Err()
}

func (q *queue) complete(ctx context.Context, item string) error {
	if err := q.db.LRem(ctx, q.processing, 0, item).Err(); err != nil {
		return err
	}
	return q.db.Del(ctx, q.leaseKey(item), q.session).Err()
}

func (q *queue) giveBack(ctx context.Context, item string) error {
	if err := q.db.LRem(ctx, q.processing, 0, item).Err(); err != nil {
		return err
	}
	if err := q.db.RPush(ctx, q.main, item).Err(); err != nil {
		return err
	}
	return q.db.Del(ctx, q.leaseKey(item), q.session).Err()
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	log.SetFlags(0)
	ctx := context.Background()
	var id [16]byte
	_, _ = rand.Read(id[:])
	name := env("REDIS_QUEUE", "job")
	rdb := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(env("REDIS_HOST", "localhost"), env("REDIS_PORT", "6379"))})
	q := &queue{
		main:       name,
		processing: name + ":processing",
		pfx:        name + ":leased_by_session:",
		session:    hex.EncodeToString(id[:]),
	}
	secs, _ := strconv.Atoi(env("ITEM_LEASE_SECS", "10"))
	q.leaseFor = time.Duration(secs) * time.Second
	work, _ := strconv.ParseFloat(env("WORK_SECONDS", "0"), 64)
	workers, _ := strconv.Atoi(env("CONCURRENCY", "1"))
	giveBack := env("GIVE_BACK", "") == "1"

	var done atomic.Int64
	var mu sync.Mutex
	given := map[string]bool{}
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range max(1, workers) {
		wg.Go(func() {
			conn := rdb.Conn()
			defer conn.Close()
			q := *q
			q.db = conn
			for {
				empty, err := q.empty(ctx)
				if err != nil {
					errc <- err
					return
				}
				if empty {
					return
				}
				item, err := q.lease(ctx, 2*time.Second)
				if err != nil {
					errc <- err
					return
				}
				if item == "" {
					continue
				}
				mu.Lock()
				back := giveBack && !given[item]
				given[item] = true
				mu.Unlock()
				if back {
					if err := q.giveBack(ctx, item); err != nil {
						errc <- err
						return
					}
					continue
				}
				time.Sleep(time.Duration(work * float64(time.Second)))
				if strings.HasPrefix(item, "bad") {
					err = q.db.RPush(ctx, q.main+":errors", "cannot process "+item).Err()
				} else {
					err = q.db.RPush(ctx, q.main+":results", strings.ToUpper(item)).Err()
				}
				if err == nil {
					err = q.complete(ctx, item)
				}
				if err != nil {
					errc <- err
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		log.Fatalf("worker: %v", err)
	}
	fmt.Printf("queue empty, %d items done\n", done.Load())
}
