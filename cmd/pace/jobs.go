package main

import (
	"context"
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

type jobsOptions struct {
	api    apiFlags
	output string
}

func newJobsCmd(a *app) *cobra.Command {
	o := &jobsOptions{}
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs",
		Long: `Jobs lists the jobs the caller may see (admins see every job), oldest
first: id, state, mode, owner, items done (of the total for a batch job),
dead items, replicas and age. -o json or -o yaml prints GET /submissions,
a map from job id to its view.`,
		Example: `  pace jobs
  pace jobs -o json | jq 'keys'`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), a) },
	}
	o.api.add(cmd.Flags())
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "table", "output format", "table", "json", "yaml")
	return cmd
}

func (o *jobsOptions) run(ctx context.Context, a *app) error {
	var jobs map[string]jobView
	if printed, err := o.api.client().show(ctx, "/submissions", o.output, a.stdout, &jobs); printed || err != nil {
		return err
	}
	views := make([]jobView, 0, len(jobs))
	for _, v := range jobs {
		views = append(views, v)
	}
	sort.Slice(views, func(i, j int) bool { return views[i].CreatedAt.Before(views[j].CreatedAt) })
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tMODE\tOWNER\tDONE\tDEAD\tREPLICAS\tAGE")
	for _, v := range views {
		done := fmt.Sprintf("%d/%d", v.Done, v.Total)
		if v.Total == 0 {
			done = fmt.Sprint(v.Done)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", v.ID, v.Status, v.Mode, v.owner(), done, v.Dead, v.Replicas,
			time.Since(v.CreatedAt).Round(time.Second))
	}
	return tw.Flush()
}
