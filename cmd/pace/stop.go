package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type stopOptions struct {
	api apiFlags
}

func newStopCmd(a *app) *cobra.Command {
	o := &stopOptions{}
	cmd := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a job: no new items, items in flight finish",
		Long: `Stop asks the manager to end job ID gracefully: a batch job's queued items
are dropped, a streaming job refuses new pushes and drains its queue, and
items in flight finish; then the job is "stopped". It returns at once;
follow the job with 'pace status ID'. A finished job cannot be stopped
(exit code 3). To end a job at once, use 'pace terminate'.`,
		Example: "  pace stop kj-3898be2\n  PACE_TOKEN=… pace stop upper-1a2b3c4 --api http://pace:8080",
		Args:    exactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.api.add(cmd.Flags())
	return cmd
}

func (o *stopOptions) run(ctx context.Context, a *app, id string) error {
	if err := o.api.client().call(ctx, "PUT", "/submissions/"+id+"/stop", nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "job %s stopping\n", id)
	return nil
}
