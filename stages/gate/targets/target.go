package targets

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/bus"
)

// Target is one place where jobs' workers run.
type Target struct {
	// Runtime starts and stops the workers.
	Runtime Runtime
	// Meter measures its jobs with a cost; nil: it measures none.
	Meter Meter
	// Loops run beside the gate while the target serves.
	Loops []func(context.Context) error
	// Restore says its workers end with the gate's leader (they are its
	// children): each new term starts the running jobs' workers again.
	Restore bool
}

// Env is what the gate's leader gives each target it opens.
type Env struct {
	Bus *bus.Client
	// Output takes the workers' output lines to their jobs' logs.
	Output *WorkerLog
	// Exited is told of each worker that exits on its own: its job's crash
	// policy (see Crashes).
	Exited func(job, replica string, cause error)
	Log    *slog.Logger
}

// Opener builds a target for one leadership term of the gate. A term's
// targets are new: no state outlives the term.
type Opener func(env Env) (Target, error)

// Open opens the named targets for a term of the gate's leader. It
// returns the executor of admitted requests on them and the func that runs
// them until ctx ends: it first starts again the workers of the targets
// that lost them with the last term, then runs the targets' loops, the
// job-log writer and the usage reporter of the metered targets.
func Open(c *bus.Client, openers map[string]Opener, opts ...Option) (*Executor, func(context.Context) error, error) {
	o := apply("gate", opts)
	output := NewWorkerLog(c, opts...)
	crashes := NewCrashes(c, output, opts...)
	env := Env{Bus: c, Output: output, Exited: crashes.Exited, Log: o.log}
	runtimes := map[string]Runtime{}
	loops := []func(context.Context) error{output.Run}
	var meters []Meter
	var restore []string
	for _, name := range slices.Sorted(maps.Keys(openers)) {
		t, err := openers[name](env)
		if err != nil {
			return nil, nil, fmt.Errorf("%s actuator: %w", name, err)
		}
		runtimes[name] = t.Runtime
		loops = append(loops, t.Loops...)
		if t.Meter != nil {
			meters = append(meters, t.Meter)
		}
		if t.Restore {
			restore = append(restore, name)
		}
	}
	loops = append(loops, NewUsageReporter(c, meters, opts...).Run)
	exec := NewExecutor(c, runtimes, opts...)
	return exec, func(ctx context.Context) error {
		exec.Restore(ctx, restore...)
		g, gctx := errgroup.WithContext(ctx)
		for _, loop := range loops {
			g.Go(func() error { return loop(gctx) })
		}
		return g.Wait()
	}, nil
}
