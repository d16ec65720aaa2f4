package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/schemas"
)

type decisionsOptions struct {
	nats    natsFlags
	output  string
	follow  bool
	changes bool
}

func newDecisionsCmd(a *app) *cobra.Command {
	o := &decisionsOptions{}
	cmd := &cobra.Command{
		Use:   "decisions JOB",
		Short: "Print a job's scaling decisions and why each was made",
		Long: `Decisions prints the scaling decisions of the job, oldest first, one per
line: time (RFC 3339, UTC), replicas from → to, the controller that decided,
and its reason in words with the numbers it used (for the deadline
controller: the time left, the items left, the measured rate per replica
and the replicas that makes).

A controller publishes a decision when it changes the replicas and, while
it keeps them, one at most every --decision-heartbeat (30 s) so that
readers know it is alive: those print as "kept". --changes prints only the
decisions that changed the replicas. With --follow it keeps printing new
decisions until interrupted. With -o json each line is the decision as
published on pace.decisions.<job> (docs/bus.md).`,
		Example: `  pace decisions render-1a2b3c4
  pace decisions render-1a2b3c4 --changes
  pace decisions render-1a2b3c4 -f -o json | jq -r .reason`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.nats.add(cmd.Flags())
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "text", "output format", "text", "json")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new decisions until interrupted")
	cmd.Flags().BoolVar(&o.changes, "changes", false, "print only the decisions that changed the replicas")
	return cmd
}

func (o *decisionsOptions) run(ctx context.Context, a *app, job string) error {
	if !schemas.ValidToken(job) {
		return usageError("job %q: must be 1-128 letters, digits, '-' or '_'", job)
	}
	c, err := o.nats.connect(ctx, a, "pace-decisions")
	if err != nil {
		return err
	}
	defer closeClient(c)
	enc := json.NewEncoder(a.stdout)
	n := 0
	for d, err := range c.Outputs().Decisions(ctx, job, o.follow) {
		if err != nil {
			if ctx.Err() != nil && o.follow {
				return nil // --follow ends with an interrupt
			}
			return signalled(ctx, err)
		}
		if o.changes && d.Replicas == d.Current {
			continue
		}
		n++
		if o.output == "json" {
			err = enc.Encode(d)
		} else {
			err = printDecision(a.stdout, d)
		}
		if err != nil {
			return err
		}
	}
	if n == 0 {
		a.log.Warn("no decisions: the job has none (is the name right? 'pace jobs' lists jobs; a job without a worker spec is not scaled)", "job", job)
	}
	return nil
}

// printDecision writes d as one line: time, replicas from → to (or kept),
// controller, reason.
func printDecision(w io.Writer, d *schemas.Decision) error {
	change := fmt.Sprintf("%d → %d", d.Current, d.Replicas)
	if d.Replicas == d.Current {
		change = fmt.Sprintf("%d kept", d.Replicas)
	}
	controller := d.Controller
	if controller == "" {
		controller = "-"
	}
	_, err := fmt.Fprintf(w, "%s  %-7s  %-9s  %s\n", d.At.UTC().Format(time.RFC3339), change, controller, d.Reason)
	return err
}
