package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

type statusOptions struct {
	api    apiFlags
	output string
}

func newStatusCmd(a *app) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a job's state and progress",
		Long: `Status shows job ID as the manager sees it: state, mode, owner, items
done, dead, pending and in flight, replicas, its start, deadline and end
times, and for a batch job the completion predicted at admission. With -o json or -o yaml it prints the whole job view of
GET /submissions/ID (docs/api.md), the spec included.`,
		Example: `  pace status kj-3898be2
  pace status upper-1a2b3c4 -o json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.api.add(cmd.Flags())
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "table", "output format", "table", "json", "yaml")
	return cmd
}

func (o *statusOptions) run(ctx context.Context, a *app, id string) error {
	var v jobView
	if printed, err := o.api.client().show(ctx, "/submissions/"+id, o.output, a.stdout, &v); printed || err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	row := func(k string, val any) { fmt.Fprintf(tw, "%s:\t%v\n", k, val) }
	row("ID", v.ID)
	row("Status", v.Status)
	if v.StopRequested && !final(v.Status) {
		row("Stop", "requested")
	}
	row("Mode", v.Mode)
	row("Owner", v.owner())
	items := fmt.Sprintf("%d done, %d dead, %d pending, %d in flight", v.Done, v.Dead, v.Pending, v.InFlight)
	if v.Total > 0 { // a streaming job has no total
		items += fmt.Sprintf(", %d total", v.Total)
	}
	row("Items", items)
	row("Replicas", v.Replicas)
	if !v.StartedAt.IsZero() {
		row("Started", v.StartedAt.Format(time.RFC3339))
	}
	if !v.Deadline.IsZero() {
		row("Deadline", v.Deadline.Format(time.RFC3339))
	}
	if p := v.Prediction; p != nil && p.Feasible != nil {
		verdict := "meets its deadline"
		if !*p.Feasible {
			verdict = fmt.Sprintf("misses its deadline (needs %d replicas)", p.ReplicasNeeded)
		}
		when := ""
		if !v.PredictedCompletion.IsZero() {
			when = " by " + v.PredictedCompletion.Format(time.RFC3339) + ","
		}
		row("Predicted", fmt.Sprintf("done in %s,%s %s; %s confidence (%s)", p.ETA.D(), when, verdict, v.Confidence, p.Basis))
	}
	if !v.FinishedAt.IsZero() {
		row("Finished", v.FinishedAt.Format(time.RFC3339))
	}
	if v.Reason != "" {
		row("Reason", v.Reason)
	}
	return tw.Flush()
}
