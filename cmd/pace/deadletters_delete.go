package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type deadDeleteOptions struct {
	nats natsFlags
}

func newDeadLettersDeleteCmd(a *app) *cobra.Command {
	o := &deadDeleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete SEQ",
		Short: "Drop a dead letter without sending its message",
		Long: `Delete removes the dead letter SEQ (as 'pace dead-letters list' prints it),
then the object of the dead-letter object store that keeps its body, if
any. Its message is not sent: it is gone for good, so look at it first
('pace dead-letters show SEQ', or 'show SEQ --raw > file' to keep its
bytes). An item counts as dead only while it has a letter.

Use it for a letter that cannot or should not be redriven: one whose body
object is missing ('show' says its message is unavailable, 'redrive'
fails), a message nobody needs again, or a stored message that is not a
readable letter at all (a newer Pace's, or junk; an object it names is
deleted by the hourly sweep). A SEQ that holds no letter is an error.`,
		Example: `  pace dead-letters show metrics:40
  pace dead-letters delete metrics:40
  pace dead-letters delete 12`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.nats.add(cmd.Flags())
	return cmd
}

func (o *deadDeleteOptions) run(ctx context.Context, a *app, id string) error {
	store, seq, err := parseLetterID(id)
	if err != nil {
		return err
	}
	c, err := o.nats.connect(ctx, a, "pace-dead-letters")
	if err != nil {
		return err
	}
	defer closeClient(c)
	if err := c.Letters().Delete(ctx, store, seq); err != nil {
		return letterError(ctx, id, err)
	}
	fmt.Fprintf(a.stdout, "deleted %s\n", id)
	return nil
}
