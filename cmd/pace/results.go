package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

type resultsOptions struct {
	nats   natsFlags
	output string
	follow bool
}

func newResultsCmd(a *app) *cobra.Command {
	o := &resultsOptions{}
	cmd := &cobra.Command{
		Use:   "results JOB",
		Short: "Print a job's results, one per line",
		Long: `Results prints every result of the job in the order they were stored, and
exits once the job has no item waiting or in progress. With --follow it
keeps waiting for new results. With -o json each line is a JSON object
with item_id and result.`,
		Example: `  pace results squares
  pace results squares -o json | jq -r .result
  pace results ingest --follow`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.nats.add(cmd.Flags())
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "text", "output format", "text", "json")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep waiting for new results")
	return cmd
}

// resultLine is the stable -o json form of a result.
type resultLine struct {
	ItemID string `json:"item_id"`
	Result string `json:"result"`
}

func (o *resultsOptions) run(ctx context.Context, a *app, job string) error {
	if !schemas.ValidToken(job) {
		return usageError("job %q: must be 1-128 letters, digits, '-' or '_'", job)
	}
	c, err := o.nats.connect(ctx, a, "pace-results")
	if err != nil {
		return err
	}
	defer closeClient(c)
	var opts []bus.ResultsOption
	if o.follow {
		opts = append(opts, bus.Follow())
	}
	enc := json.NewEncoder(a.stdout)
	n := 0
	for r, err := range c.Outputs().Results(ctx, job, opts...) {
		if err != nil {
			if ctx.Err() != nil && o.follow {
				return nil // --follow ends with an interrupt
			}
			return signalled(ctx, err)
		}
		n++
		if o.output == "json" {
			if err := enc.Encode(resultLine{ItemID: r.ItemID, Result: r.Output}); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintln(a.stdout, r.Output); err != nil {
			return err
		}
	}
	if n == 0 {
		a.log.Warn("no results: the job has none and nothing waiting (is the name right? 'pace jobs' lists jobs)", "job", job)
	}
	return nil
}
