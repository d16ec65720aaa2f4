package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

type workerOptions struct {
	nats        natsFlags
	exec        string
	concurrency int
	grace       time.Duration
	id          string
	retryDelay  time.Duration
}

func newWorkerCmd(a *app) *cobra.Command {
	o := &workerOptions{}
	cmd := &cobra.Command{
		Use:   "worker JOB --exec CMD",
		Short: "Process a job's items by running a command once per item",
		Long: `Worker takes the job's items from its queue and runs CMD (with sh -c) once
per item: the item's payload is the command's standard input, its standard
output (without trailing newlines) becomes the item's result, and exit code
0 means success. A failing item is retried later with a growing delay and,
once its deliveries are used up, moved to the dead-letter subject with the
command's exit status and the end of its standard error.

The worker extends the lease of running items, so slow items are not given
to another worker while this one is healthy. On SIGTERM or Ctrl-C it stops
taking items, lets running ones finish within --grace, returns the rest to
the queue and exits 0.`,
		Example: `  pace worker squares --exec 'read n; echo $((n*n))'
  pace worker thumbnails --exec './thumb.sh' --concurrency 4
  PACE_EXEC='wc -c' pace worker sizes`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.nats.add(cmd.Flags())
	cmd.Flags().StringVar(&o.exec, "exec", "", "command run once per item, item on stdin, result on stdout (required)")
	cmd.Flags().IntVarP(&o.concurrency, "concurrency", "c", 1, "items processed at once")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "time running items get to finish on shutdown")
	cmd.Flags().StringVar(&o.id, "id", "", "worker id shown in results (default host-pid-random)")
	cmd.Flags().DurationVar(&o.retryDelay, "retry-delay", time.Second, "delay before a failed item is retried; doubles per failure, at most 1m")
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
	w, err := c.Worker(job, execHandler(o.exec), opts...)
	if err != nil {
		return usageError("%v", err)
	}
	err = w.Run(ctx)
	if errors.Is(err, bus.ErrJobFinished) {
		return rejected(err)
	}
	return err // a stop by signal is a clean exit
}

// commandEnv is the environment of an item's command: the worker's own,
// without the credentials the worker connects with (PACE_NATS_* but the
// URL, PACE_TOKEN), and the item's job and id.
func commandEnv(item *schemas.WorkItem) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "PACE_TOKEN" || strings.HasPrefix(k, "PACE_NATS_") && k != "PACE_NATS_URL"
	})
	return append(env, "PACE_JOB="+item.Job, "PACE_ITEM_ID="+item.ID)
}

// stderrTail bounds the standard error kept in an item's error.
const stderrTail = 2048

// execHandler runs command with sh -c per item. A cancelled item gets SIGTERM,
// then SIGKILL 5 seconds later.
func execHandler(command string) bus.Handler {
	return func(ctx context.Context, item *schemas.WorkItem) (string, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Stdin = strings.NewReader(item.Payload)
		cmd.Env = commandEnv(item)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Run(); err != nil {
			tail := stderr.Bytes()
			if len(tail) > stderrTail {
				tail = tail[len(tail)-stderrTail:]
			}
			if msg := strings.TrimSpace(string(tail)); msg != "" {
				return "", fmt.Errorf("%s: %w: %s", command, err, msg)
			}
			return "", fmt.Errorf("%s: %w", command, err)
		}
		return strings.TrimRight(stdout.String(), "\r\n"), nil
	}
}
