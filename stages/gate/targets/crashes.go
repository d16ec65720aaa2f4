package targets

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// Crashes applies the before_first_result rule of a job's failure policy to
// the replicas a runtime supervises: a job whose replicas exit on their own
// (or cannot start) Spec.Failure.BeforeFirstResult times before the job's
// first result is failed, through the manager (pace.control.fail), with the
// last exit and its workers' last output lines as the reason. A result
// resets the count; so does the rule being turned off.
type Crashes struct {
	c      *bus.Client
	output *WorkerLog // the workers' last lines
	log    *slog.Logger

	mu    sync.Mutex
	exits map[string]int // by job: exits since its last check found a result
}

// NewCrashes returns a Crashes failing jobs through c; output has the lines
// of the same runtime's workers.
func NewCrashes(c *bus.Client, output *WorkerLog, opts ...Option) *Crashes {
	return &Crashes{c: c, output: output, log: apply("crashes", opts).log, exits: map[string]int{}}
}

// Exited takes the exit of a replica of job (local.Config.Exited). It asks
// the bus, so it is called from the replica's supervisor, which waits
// before restarting it anyway.
func (k *Crashes) Exited(job, replica string, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := k.c.Jobs().Status(ctx, job)
	if err != nil || rec.State.Final() || !rec.Spec.Failure.On(schemas.RuleBeforeFirstResult) {
		k.reset(job)
		return
	}
	results, err := k.c.Outputs().ResultCount(ctx, job)
	if err != nil {
		k.log.Warn("replica exit not checked against the failure policy", "job", job, "err", err)
		return
	}
	if results > 0 {
		k.reset(job)
		return
	}
	k.mu.Lock()
	k.exits[job]++
	n := k.exits[job]
	k.mu.Unlock()
	if n < rec.Spec.Failure.BeforeFirstResult {
		return
	}
	reason := fmt.Sprintf("failure policy before_first_result: its workers exited %d times before the job's first result; "+
		"the last, replica %s: %v", n, replica, cause)
	if tail := k.output.Tail(job); len(tail) > 0 {
		reason += "; its workers' last lines: " + strings.Join(tail, " | ")
	}
	if err := k.c.Jobs().Fail(ctx, job, reason); err != nil {
		k.log.Warn("job not failed by its failure policy; asked again at the next exit", "job", job, "err", err)
		return
	}
	k.reset(job)
}

func (k *Crashes) reset(job string) {
	k.mu.Lock()
	delete(k.exits, job)
	k.mu.Unlock()
}
