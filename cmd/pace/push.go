package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

type pushOptions struct {
	nats  natsFlags
	file  string
	batch int
}

func newPushCmd(a *app) *cobra.Command {
	o := &pushOptions{}
	cmd := &cobra.Command{
		Use:   "push JOB",
		Short: "Push work items to a job, one per input line",
		Long: `Push reads items from standard input (or --file), one per line, and
publishes them to the job's queue. Blank lines are skipped; the last line
is kept even without a trailing newline. A job that does not exist yet is
created as a streaming job.`,
		Example: `  seq 1 1000 | pace push squares
  pace push thumbnails --file urls.txt
  PACE_NATS_URL=nats://nats:4222 pace push ingest < items.txt`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.nats.add(cmd.Flags())
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "read items from this file instead of standard input")
	cmd.Flags().IntVar(&o.batch, "batch", 1000, "items published per round trip")
	return cmd
}

func (o *pushOptions) run(ctx context.Context, a *app, job string) error {
	if !schemas.ValidToken(job) {
		return usageError("job %q: must be 1-128 letters, digits, '-' or '_'", job)
	}
	if o.batch < 1 {
		return usageError("--batch %d: must be >= 1", o.batch)
	}
	in := a.stdin
	if o.file != "" {
		f, err := os.Open(o.file)
		if err != nil {
			return rejected(fmt.Errorf("--file: %w", err))
		}
		defer f.Close() //nolint:errcheck // read-only file
		in = f
	}
	c, err := o.nats.connect(ctx, a, "pace-push")
	if err != nil {
		return err
	}
	defer closeClient(c)

	n, err := pushLines(ctx, c, job, in, o.batch)
	fmt.Fprintf(a.stdout, "pushed %d items to %s\n", n, job)
	if errors.Is(err, bus.ErrJobFinished) {
		return rejected(err)
	}
	return signalled(ctx, err)
}

// pushLines pushes every non-blank line of in as an item, batch at a time,
// and returns how many were stored.
func pushLines(ctx context.Context, c *bus.Client, job string, in io.Reader, batch int) (int, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	items := make([]schemas.WorkItem, 0, batch)
	total := 0
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		if err := c.PushItems(ctx, job, items); err != nil {
			return err
		}
		total += len(items)
		items = items[:0]
		return nil
	}
	for sc.Scan() {
		line, ok := schemas.ItemLine(sc.Text())
		if !ok {
			continue
		}
		items = append(items, schemas.WorkItem{Payload: line})
		if len(items) == batch {
			if err := flush(); err != nil {
				return total, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return total, fmt.Errorf("read items: %w", err)
	}
	return total, flush()
}
