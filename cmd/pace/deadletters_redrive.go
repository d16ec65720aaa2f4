package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

type deadRedriveOptions struct {
	nats natsFlags
	job  string
	all  bool
}

func newDeadLettersRedriveCmd(a *app) *cobra.Command {
	o := &deadRedriveOptions{}
	cmd := &cobra.Command{
		Use:   "redrive SEQ... | --job JOB | --all",
		Short: "Send dead letters' messages again",
		Long: `Redrive publishes the messages of the dead letters SEQ... (as 'pace
dead-letters list' prints them), of every letter of JOB (--job) or of every
letter (--all), to be worked on anew: an item that used up its deliveries
as the same item on its job's queue, which must still be running; an
unreadable message byte for byte to its subject, once whatever could not
read it is fixed. It prints one line per letter and a total.

Every SEQ is looked up before anything is sent: an unknown one redrives
nothing. A letter named twice is sent once. A letter is removed once its
message is sent (check 'list' first if you want a record): redriving it
again finds nothing, and an item that dies again gets a new letter. A dead
item that already has a result is not sent; its letter is removed. With
--job or --all, letters of finished jobs are skipped. Should the removal
fail, the line says so: redrive the letter again (within 2 minutes its
message is not sent twice; an item is never sent once it has a result).`,
		Example: `  pace dead-letters redrive 12
  pace dead-letters redrive 12 13 metrics:40
  pace dead-letters redrive --job squares
  pace dead-letters redrive --all`,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args) },
	}
	o.nats.add(cmd.Flags())
	cmd.Flags().StringVar(&o.job, "job", "", "redrive every dead letter of this job")
	cmd.Flags().BoolVar(&o.all, "all", false, "redrive every dead letter of every job")
	return cmd
}

// redriveTally counts what a redrive did.
type redriveTally struct{ redriven, skipped, failed int }

func (o *deadRedriveOptions) run(ctx context.Context, a *app, ids []string) error {
	chosen := 0
	for _, set := range []bool{len(ids) > 0, o.job != "", o.all} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return usageError("pace dead-letters redrive takes exactly one of: SEQ arguments, --job JOB, --all")
	}
	job, err := jobArg("--job", o.job)
	if err != nil {
		return err
	}
	type ref struct {
		store bus.LetterStore
		seq   uint64
	}
	refs := make([]ref, 0, len(ids))
	for _, id := range ids {
		store, seq, err := parseLetterID(id)
		if err != nil {
			return err
		}
		refs = append(refs, ref{store, seq})
	}
	c, err := o.nats.connect(ctx, a, "pace-dead-letters")
	if err != nil {
		return err
	}
	defer closeClient(c)
	var letters []*bus.StoredLetter
	if len(ids) == 0 {
		if letters, err = c.Letters().All(ctx, job); err != nil {
			return signalled(ctx, err)
		}
	}
	seen := map[ref]bool{}
	for i, r := range refs {
		if seen[r] {
			continue
		}
		seen[r] = true
		l, err := findLetter(ctx, c, ids[i], r.store, r.seq)
		if err != nil {
			return fmt.Errorf("%w; nothing was redriven", err)
		}
		letters = append(letters, l)
	}
	var t redriveTally
	var errs []error
	sent := map[string]string{} // job/item → the SEQ it was just redriven as
	for _, l := range letters {
		if err := o.redrive(ctx, a, c, l, sent, &t); err != nil {
			t.failed++
			errs = append(errs, fmt.Errorf("SEQ %s: %w", l.ID(), err))
		}
	}
	fmt.Fprintf(a.stdout, "redriven %d of %d dead letters (%d skipped, %d failed)\n", t.redriven, len(letters), t.skipped, t.failed)
	if len(errs) > 0 {
		return signalled(ctx, errors.Join(errs...))
	}
	return nil
}

// redrive sends l's message again, or skips it, and says which.
func (o *deadRedriveOptions) redrive(ctx context.Context, a *app, c *bus.Client, l *bus.StoredLetter,
	sent map[string]string, t *redriveTally) error {
	id, to, item := l.ID(), l.Subject, l.Job+"/"+l.ItemID
	if l.Reason == schemas.MaxDeliveries {
		to = c.Prefix().Work(l.Job)
		if as := sent[item]; as != "" {
			t.skipped++
			fmt.Fprintf(a.stdout, "skipped %s: item %s of %s was redriven as %s\n", id, l.ItemID, l.Job, as)
			return nil
		}
	}
	err := c.Letters().Redrive(ctx, l)
	switch {
	case errors.Is(err, bus.ErrJobFinished) && (o.job != "" || o.all):
		t.skipped++
		fmt.Fprintf(a.stdout, "skipped %s: job %s is finished\n", id, l.Job)
		return nil
	case errors.Is(err, bus.ErrHasResult):
		t.skipped++
		fmt.Fprintf(a.stdout, "skipped %s: item %s of %s already has a result; letter removed\n", id, l.ItemID, l.Job)
		return nil
	case err != nil:
		return err
	}
	t.redriven++
	if l.Reason == schemas.MaxDeliveries {
		sent[item] = id
		fmt.Fprintf(a.stdout, "redriven %s: item %s of %s to %s\n", id, l.ItemID, l.Job, safeText(to))
	} else {
		fmt.Fprintf(a.stdout, "redriven %s: %s message of %s to %s\n", id, l.Reason, l.Job, safeText(to))
	}
	return nil
}
