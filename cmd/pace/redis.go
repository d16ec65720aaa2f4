package main

import (
	"context"
	"net"

	"github.com/pace-platform/pace/worker/rediswq"
)

// wireRedis serves the jobs' queues over the Redis protocol on ln, for
// Asperathos workers (docs/asperathos.md), and tells local workers where:
// REDIS_HOST, REDIS_PORT and REDIS_QUEUE, their job's id on an open bus or
// its token (mint) on an authenticated one, where open connects with it.
func (w *wiring) wireRedis(ln net.Listener, open rediswq.Opener, mint func(job string) string) {
	w.redisAddr = ln.Addr().String()
	host, port, _ := net.SplitHostPort(w.redisAddr)
	jobEnv := w.jobEnv
	w.jobEnv = func(job string) []string {
		var env []string
		if jobEnv != nil {
			env = jobEnv(job)
		}
		queue := job
		if mint != nil {
			queue = mint(job)
		}
		return append(env, "REDIS_HOST="+host, "REDIS_PORT="+port, "REDIS_QUEUE="+queue)
	}
	front := rediswq.New(rediswq.Config{Open: open, Secured: mint != nil, Log: w.log})
	w.loops = append(w.loops, func(ctx context.Context) error { return front.Serve(ctx, ln) })
}
