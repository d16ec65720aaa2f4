package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type deleteOptions struct {
	api apiFlags
}

func newDeleteCmd(a *app) *cobra.Command {
	o := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a finished job and its data",
		Long: `Delete removes finished job ID and everything stored about it: its record,
events, results, dead letters, metrics and log. It cannot be undone. A job
that still runs is refused (exit code 3): stop or terminate it first.`,
		Example: "  pace delete kj-3898be2\n  PACE_TOKEN=… pace delete upper-1a2b3c4 --api http://pace:8080",
		Args:    exactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.api.add(cmd.Flags())
	return cmd
}

func (o *deleteOptions) run(ctx context.Context, a *app, id string) error {
	if err := o.api.client().call(ctx, "DELETE", "/submissions/"+id, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "job %s deleted\n", id)
	return nil
}
