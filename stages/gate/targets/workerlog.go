package targets

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// Worker output in a job's log: at most workerLinesPerSecond lines a second
// per job, in bursts of up to workerLinesBurst; the lines over it are
// counted and reported in one line once output may flow again. The log
// stream itself keeps a job's newest lines only (bus.LogLinesPerJob).
const (
	workerLinesPerSecond = 20
	workerLinesBurst     = 200
	workerLogQueue       = 4096 // lines waiting to be published, all jobs
)

// WorkerLog publishes the output lines of the workers a runtime runs to
// their job's log (pace.logs.<job>), tagged with the worker, rate-limited
// per job. Line never blocks the worker: a line that finds the queue full is
// dropped and counted like a rate-limited one.
type WorkerLog struct {
	c     *bus.Client
	log   *slog.Logger
	clk   clock.PassiveClock
	lines chan *schemas.LogLine

	mu   sync.Mutex
	jobs map[string]*jobOutput
}

type jobOutput struct {
	limit   *rate.Limiter
	dropped int
	last    time.Time // of its last line
	tail    []string  // its last tailLines lines, oldest first, rate-limited or not
}

// tailLines is how many of a job's last output lines Tail keeps.
const tailLines = 5

// NewWorkerLog returns a WorkerLog publishing with c; call Run.
func NewWorkerLog(c *bus.Client, opts ...Option) *WorkerLog {
	o := apply("worker-log", opts)
	return &WorkerLog{c: c, log: o.log, clk: o.clk,
		lines: make(chan *schemas.LogLine, workerLogQueue), jobs: map[string]*jobOutput{}}
}

// Line takes one line worker of job wrote (local.Config.Output).
func (l *WorkerLog) Line(job, worker, line string) {
	at := l.clk.Now()
	l.mu.Lock()
	o := l.jobs[job]
	if o == nil {
		o = &jobOutput{limit: rate.NewLimiter(workerLinesPerSecond, workerLinesBurst)}
		l.jobs[job] = o
	}
	o.last = at
	o.tail = append(o.tail[max(0, len(o.tail)-tailLines+1):], line)
	if !o.limit.AllowN(at, 1) {
		o.dropped++
		l.mu.Unlock()
		return
	}
	var lines []*schemas.LogLine
	if o.dropped > 0 {
		lines = append(lines, &schemas.LogLine{Job: job, At: at, Source: "pace",
			Line: fmt.Sprintf("%d lines of worker output dropped (more than %d a second)", o.dropped, workerLinesPerSecond)})
		o.dropped = 0
	}
	lines = append(lines, &schemas.LogLine{Job: job, At: at, Source: worker, Line: line})
	for _, ll := range lines {
		select {
		case l.lines <- ll:
		default:
			o.dropped++
		}
	}
	l.mu.Unlock()
}

// Tail returns the last lines the workers of job wrote, oldest first, while
// the job's output is remembered (a minute after its last line).
func (l *WorkerLog) Tail(job string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o := l.jobs[job]; o != nil {
		return append([]string(nil), o.tail...)
	}
	return nil
}

// forgetIdle drops the limiters of jobs silent for a minute, whose buckets
// are full again anyway.
func (l *WorkerLog) forgetIdle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for job, o := range l.jobs {
		if o.dropped == 0 && l.clk.Now().Sub(o.last) > time.Minute {
			delete(l.jobs, job)
		}
	}
}

// Run publishes the lines until ctx ends; cancellation returns nil.
func (l *WorkerLog) Run(ctx context.Context) error {
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sweep.C:
			l.forgetIdle()
		case line := <-l.lines:
			if err := l.c.Outputs().PublishLog(ctx, line); err != nil && ctx.Err() == nil {
				l.log.Warn("worker output not logged", "job", line.Job, "err", err)
			}
		}
	}
}
