package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type terminateOptions struct {
	api apiFlags
}

func newTerminateCmd(a *app) *cobra.Command {
	o := &terminateOptions{}
	cmd := &cobra.Command{
		Use:   "terminate ID",
		Short: "Terminate a job at once and delete its workers",
		Long: `Terminate ends job ID at once: it becomes "terminated", its queue is
released and its workers are deleted, so items in flight are abandoned.
A finished job cannot be terminated (exit code 3). To let items in flight
finish, use 'pace stop'.`,
		Example: "  pace terminate kj-3898be2\n  PACE_TOKEN=… pace terminate upper-1a2b3c4 --api http://pace:8080",
		Args:    exactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.api.add(cmd.Flags())
	return cmd
}

func (o *terminateOptions) run(ctx context.Context, a *app, id string) error {
	if err := o.api.client().call(ctx, "PUT", "/submissions/"+id+"/terminate", nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "job %s terminated\n", id)
	return nil
}
