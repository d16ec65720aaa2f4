package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/execpool"
	"github.com/pace-platform/pace/schemas"
)

type workerOptions struct {
	nats        natsFlags
	exec        string
	execMode    string
	concurrency int
	grace       time.Duration
	id          string
	retryDelay  time.Duration
	trace       tracingFlags
}

func newWorkerCmd(a *app) *cobra.Command {
	o := &workerOptions{}
	cmd := &cobra.Command{
		Use:   "worker JOB --exec CMD",
		Short: "Process a job's items with a command, once per item or streamed through it",
		Long: `Worker takes the job's items from its queue and runs CMD (with sh -c) on
them. A failing item is retried later with a growing delay and, once its
deliveries are used up, moved to the dead-letter subject with its error.

--exec-mode says how items reach CMD:

  item   (default) CMD runs once per item: the payload is its standard
         input, its standard output (without trailing newlines) the result,
         exit code 0 success; a failure's error keeps the exit status and the
         end of its standard error. The item's id is in PACE_ITEM_ID.
  lines  CMD starts once per concurrency slot and stays running: each item's
         payload is one line on its standard input, and the next line of
         its standard output is the result. A payload holding a newline
         fails (use json).
  json   as lines, but an item is the line {"id": ID, "payload": PAYLOAD}
         and CMD answers {"id": ID, "result": RESULT} or {"id": ID, "error":
         MESSAGE}; an error fails the item alone.

Streaming through one process is tens of times faster than a fork per item
for quick commands. CMD must answer every line with exactly one line, and
flush it at once: most programs (tr, sed, grep, awk, python) buffer what
they write to a pipe and so never answer. Use programs that do not buffer
(cat, a shell loop of read and echo), 'stdbuf -oL CMD' (C programs such as
tr), 'sed -u', 'grep --line-buffered', 'python -u', 'jq --unbuffered',
'mawk -W interactive' (mawk, Debian's awk, buffers its input too) or
gawk's fflush(); the worker warns when a process has not answered an item
for 10s. A process that exits, answers with a wrong id or garbage
(json), or is still working when the worker gives up the item, is killed
(SIGTERM, then SIGKILL 5s later) and a new one started for the next item;
the item it held fails and returns to the queue, so nothing is lost, and
each item's result is stored once. Its standard error goes to the
worker's.

The worker extends the lease of running items, so slow items are not given
to another worker while this one is healthy. On SIGTERM or Ctrl-C it stops
taking items, lets running ones finish within --grace, returns the rest to
the queue, stops its processes and exits 0.`,
		Example: `  pace worker squares --exec 'read n; echo $((n*n))'
  pace worker thumbnails --exec './thumb.sh' --concurrency 4
  PACE_EXEC='wc -c' pace worker sizes
  pace worker words --exec 'stdbuf -oL tr a-z A-Z' --exec-mode lines   # tr alone buffers: no answer
  pace worker words --exec 'sed -u s/colour/color/g' --exec-mode lines -c 4
  pace worker words --exec "jq -c --unbuffered '{id, result: (.payload|ascii_upcase)}'" --exec-mode json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.nats.add(cmd.Flags())
	cmd.Flags().StringVar(&o.exec, "exec", "", "command run with sh -c on the items, item on stdin, result on stdout (required)")
	choiceVarP(cmd.Flags(), &o.execMode, "exec-mode", "", schemas.ExecItem, "how items reach the command", schemas.ExecItem, schemas.ExecLines, schemas.ExecJSON)
	cmd.Flags().IntVarP(&o.concurrency, "concurrency", "c", 1, "items processed at once")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "time running items get to finish on shutdown")
	cmd.Flags().StringVar(&o.id, "id", "", "worker id shown in results (default host-pid-random)")
	cmd.Flags().DurationVar(&o.retryDelay, "retry-delay", time.Second, "delay before a failed item is retried; doubles per failure, at most 1m")
	o.trace.addExport(cmd.Flags())
	return cmd
}

func (o *workerOptions) run(ctx context.Context, a *app, job string) error {
	switch {
	case !schemas.ValidToken(job):
		return usageError("job %q: must be 1-128 letters, digits, '-' or '_'", job)
	case strings.TrimSpace(o.exec) == "":
		return usageError("--exec is required: the command to run for each item")
	case o.concurrency < 1:
		return usageError("--concurrency %d: must be >= 1", o.concurrency)
	case o.grace < 0:
		return usageError("--grace %s: must not be negative", o.grace)
	case o.retryDelay <= 0 || o.retryDelay > time.Minute:
		return usageError("--retry-delay %s: must be in (0, 1m]", o.retryDelay)
	}
	if err := o.trace.validate(); err != nil {
		return err
	}
	stopTraces, err := o.trace.start(ctx, a, "pace-worker")
	if err != nil {
		return err
	}
	defer stopTraces()
	c, err := o.nats.connect(ctx, a, "pace-worker")
	if err != nil {
		return err
	}
	defer closeClient(c)
	opts := []bus.WorkerOption{bus.WithConcurrency(o.concurrency), bus.WithGrace(o.grace),
		bus.WithRetryDelay(o.retryDelay, time.Minute)}
	if o.id != "" {
		opts = append(opts, bus.WithWorkerID(o.id))
	}
	perItem := execpool.NewPerItem(o.exec, cleanEnv(), a.log.With("job", job))
	var pool *execpool.Pool
	opts = append(opts, bus.WithJobOpened(func(rec *schemas.JobRecord) { // before the first item
		if g := rec.Spec.Worker.TerminationGrace.D(); g > 0 {
			perItem.SetKillDelay(g)
			if pool != nil {
				pool.SetKillDelay(g)
			}
		}
	}))
	handler := perItem.Handle
	if o.execMode != schemas.ExecItem { // lines or json, which execpool names alike
		pool, err = execpool.New(execpool.Config{Command: o.exec, Mode: execpool.Mode(o.execMode),
			Processes: o.concurrency, Env: append(cleanEnv(), "PACE_JOB="+job)},
			a.log.With("job", job))
		if err != nil {
			return usageError("%v", err)
		}
		defer pool.Close() // after Run, which waits for the items in flight
		handler = pool.Handle
	}
	w, err := c.Worker(job, handler, opts...)
	if err != nil {
		return usageError("%v", err)
	}
	err = w.Run(ctx)
	if errors.Is(err, bus.ErrJobFinished) {
		return rejected(err)
	}
	return err // a stop by signal is a clean exit
}

// cleanEnv is the worker's environment without the credentials it connects
// with (PACE_NATS_* but the URL, PACE_TOKEN): what its commands get.
func cleanEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "PACE_TOKEN" || strings.HasPrefix(k, "PACE_NATS_") && k != "PACE_NATS_URL"
	})
}
