package main

import (
	"context"
	"net"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/rediswq"
)

// listenRedis opens the Redis front's listener (--redis-listen) once; the
// front itself runs with the gate, beside the workers it serves.
func (w *wiring) listenRedis() error {
	addr := w.f.redis.listen
	if w.redisLn != nil || addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageError("--redis-listen %s: %v", addr, err)
	}
	w.redisLn = ln
	return nil
}

// redisAddr is where the job views say the Redis front is: "" without one.
func (w *wiring) redisAddr() string {
	if w.f.redis.podAddr != "" {
		return w.f.redis.podAddr
	}
	if w.redisLn == nil {
		return ""
	}
	return w.redisLn.Addr().String()
}

// wireRedis serves the jobs' queues over the Redis protocol, for Asperathos
// workers (docs/asperathos.md), and tells the local workers of jobs that
// speak it (worker.protocol redis) where: REDIS_HOST, REDIS_PORT and
// REDIS_QUEUE, which is their job's id on an open bus, and its token when
// workers get job tokens, with which the front then logs in for the job. c serves every queue on an open bus, and writes the front's
// lines to the jobs' logs (the errors workers push, commands it does not
// serve).
func (w *wiring) wireRedis(c *bus.Client) {
	ln, mint, open := w.redisLn, w.jobToken, w.jobClient
	if mint == nil || open == nil {
		mint, open = nil, rediswq.SharedClient(c)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	w.redisEnv = func(job string) []string {
		queue := job
		if mint != nil {
			queue = mint(job)
		}
		return []string{"REDIS_HOST=" + host, "REDIS_PORT=" + port, "REDIS_QUEUE=" + queue}
	}
	front := rediswq.New(rediswq.Config{Open: open, Secured: mint != nil, Journal: c.Outputs().PublishLog, Log: w.log})
	w.loops = append(w.loops, func(ctx context.Context) error { return front.Serve(ctx, ln) })
}
