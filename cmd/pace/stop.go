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
		Use:     "stop ID",
		Short:   "Stop a job: no new items, items in flight finish",
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
