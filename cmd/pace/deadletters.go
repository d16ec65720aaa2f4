package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

func newDeadLettersCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead-letters",
		Short: "List, show, redrive and delete dead letters",
		Long: `Dead-letters works with the messages Pace gave up on: work items that used
up their deliveries, and messages a worker or a stage could not read, each
kept with why it failed and, for an unreadable one, its bytes exactly.

A letter is named by its SEQ, its sequence in the stream that keeps it: a
number such as 12 for a job's dead items (pace.dead.<job>), metrics:40 for a
message a stage set aside (pace.metrics.<job>.dead). 'list' prints them,
'show' prints one, 'redrive' sends letters' messages again, and 'delete'
drops a letter without sending its message. The commands talk to NATS, like
'pace results': redriving publishes on the bus.`,
		Example: `  pace dead-letters list
  pace dead-letters show 12
  pace dead-letters redrive 12 metrics:40
  pace dead-letters delete metrics:41`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError("%s needs a subcommand: list, show, redrive or delete", cmd.CommandPath())
		},
	}
	cmd.AddCommand(newDeadLettersListCmd(a), newDeadLettersShowCmd(a), newDeadLettersRedriveCmd(a), newDeadLettersDeleteCmd(a))
	return cmd
}

// parseLetterID reads a SEQ as the listing prints it (bus.StoredLetter.ID).
func parseLetterID(s string) (bus.LetterStore, uint64, error) {
	store, seq, err := bus.ParseLetterID(s)
	if err != nil {
		return "", 0, usageError("SEQ %q: want a SEQ as 'pace dead-letters list' prints it, such as 12 or metrics:40", s)
	}
	return store, seq, nil
}

// jobArg checks a JOB argument or flag value; "" means every job ("*").
func jobArg(name, job string) (string, error) {
	if job == "" {
		return "*", nil
	}
	if !schemas.ValidToken(job) {
		return "", usageError("%s %q: must be 1-128 letters, digits, '-' or '_'", name, job)
	}
	return job, nil
}

// letterLine is the stable -o json form of a dead letter: the dead_letter
// fields, its SEQ and the size of the message it keeps; for 'show', why
// that message could not be read, if it could not.
type letterLine struct {
	Seq       string `json:"seq"`
	Size      int    `json:"size"`
	BodyError string `json:"body_error,omitempty"`
	*schemas.DeadLetter
}

func newLetterLine(l *bus.StoredLetter) letterLine {
	return letterLine{Seq: l.ID(), Size: l.Size(), DeadLetter: l.DeadLetter}
}

type deadListOptions struct {
	nats   natsFlags
	output string
	follow bool
}

func newDeadLettersListCmd(a *app) *cobra.Command {
	o := &deadListOptions{}
	cmd := &cobra.Command{
		Use:   "list [JOB]",
		Short: "List dead letters, of one job or of every job",
		Long: `List prints the dead letters of JOB (of every job without one), oldest
first: SEQ (what 'show' and 'redrive' take), job, reason (max_deliveries or
malformed), size of the kept message in bytes, when Pace gave up on it, and
the subject it was published to. With --follow it keeps printing new
letters until interrupted. With -o json each line is a JSON object: the
dead_letter fields (raw in base64, or raw_object and raw_size for a body
too large for its letter, kept in the dead-letter object store), seq and
size.`,
		Example: `  pace dead-letters list
  pace dead-letters list squares -o json | jq -r .last_error
  pace dead-letters list --follow`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("%s takes at most one JOB, got %q", cmd.CommandPath(), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), a, strings.Join(args, ""))
		},
	}
	o.nats.add(cmd.Flags())
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "table", "output format", "table", "json")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new dead letters")
	return cmd
}

// letterRow is a table row; columns are padded rather than aligned on the
// widest value, so that --follow prints each row as it comes.
const letterRow = "%-12s  %-20s  %-14s  %8s  %-20s  %s\n"

func (o *deadListOptions) run(ctx context.Context, a *app, job string) error {
	job, err := jobArg("JOB", job)
	if err != nil {
		return err
	}
	c, err := o.nats.connect(ctx, a, "pace-dead-letters")
	if err != nil {
		return err
	}
	defer closeClient(c)
	if o.output == "table" {
		fmt.Fprintf(a.stdout, letterRow, "SEQ", "JOB", "REASON", "SIZE", "AT", "SUBJECT")
	}
	if !o.follow {
		letters, err := c.Letters().All(ctx, job)
		if err != nil {
			return signalled(ctx, err)
		}
		for _, l := range letters {
			if err := o.print(a.stdout, l); err != nil {
				return err
			}
		}
		return nil
	}
	var mu sync.Mutex // serializes rows from the two stores
	g, gctx := errgroup.WithContext(ctx)
	for _, store := range bus.LetterStores {
		g.Go(func() error {
			for l, err := range c.Letters().List(gctx, store, job, true) {
				if err != nil {
					return err
				}
				mu.Lock()
				err = o.print(a.stdout, l)
				mu.Unlock()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil // --follow ends with an interrupt
}

func (o *deadListOptions) print(w io.Writer, l *bus.StoredLetter) error {
	if o.output == "json" {
		return json.NewEncoder(w).Encode(newLetterLine(l))
	}
	_, err := fmt.Fprintf(w, letterRow, l.ID(), l.Job, l.Reason, strconv.Itoa(l.Size()),
		l.At.UTC().Format(time.RFC3339), safeText(l.Subject))
	return err
}
