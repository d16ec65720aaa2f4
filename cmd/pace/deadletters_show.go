package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/bus"
)

type deadShowOptions struct {
	nats   natsFlags
	output string
	raw    bool
}

func newDeadLettersShowCmd(a *app) *cobra.Command {
	o := &deadShowOptions{}
	cmd := &cobra.Command{
		Use:   "show SEQ",
		Short: "Print one dead letter and the message it keeps",
		Long: `Show prints the dead letter SEQ (as 'pace dead-letters list' prints it):
job, item, reason, deliveries, last error, subject, headers, and the kept
message: as text when it is printable UTF-8, else as a hex dump, so that no
byte reaches the terminal unescaped. --raw writes the message's exact bytes
to standard output instead (an item's payload, or an unreadable message's
body); -o json prints the letter with its body in base64 (raw). A body
too large to travel in its letter is read from the dead-letter object store
(the letter's raw_object). Should that object be missing, show still prints
the letter and says why its message is unavailable (with --raw it fails;
-o json sets body_error); 'pace dead-letters delete SEQ' drops such a
letter.`,
		Example: `  pace dead-letters show 12
  pace dead-letters show metrics:40 --raw > message.bin
  pace dead-letters show 12 -o json | jq -r .raw | base64 -d | xxd`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.nats.add(cmd.Flags())
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "text", "output format", "text", "json")
	cmd.Flags().BoolVar(&o.raw, "raw", false, "write the kept message's exact bytes to standard output, nothing else")
	return cmd
}

func (o *deadShowOptions) run(ctx context.Context, a *app, id string) error {
	store, seq, err := parseLetterID(id)
	if err != nil {
		return err
	}
	if o.raw && o.output != "text" {
		return usageError("--raw and --output %s exclude each other: --raw writes the bytes alone", o.output)
	}
	c, err := o.nats.connect(ctx, a, "pace-dead-letters")
	if err != nil {
		return err
	}
	defer closeClient(c)
	l, err := findLetter(ctx, c, id, store, seq)
	if err != nil {
		return err
	}
	body, bodyErr := c.Letters().Body(ctx, l.DeadLetter)
	if bodyErr != nil && ctx.Err() != nil {
		return signalled(ctx, fmt.Errorf("SEQ %s: %w", id, bodyErr))
	}
	switch {
	case o.raw && bodyErr != nil:
		return fmt.Errorf("SEQ %s: message unavailable: %w (%s)", id, bodyErr, deleteHint(id))
	case o.raw:
		_, err = a.stdout.Write(body)
		return err
	case o.output == "json":
		line := newLetterLine(l)
		if bodyErr != nil {
			line.BodyError = bodyErr.Error()
		} else if l.RawObject != "" {
			withBody := *l.DeadLetter
			withBody.Raw = body
			line.DeadLetter = &withBody
		}
		_, err = printStructured(a.stdout, "json", line)
		return err
	}
	return printLetter(a.stdout, l, body, bodyErr)
}

// deleteHint tells how to drop letter id, whose message is unavailable.
func deleteHint(id string) string {
	return "'pace dead-letters delete " + id + "' drops the letter"
}

// findLetter reads the letter SEQ id, an input error when there is none.
func findLetter(ctx context.Context, c *bus.Client, id string, store bus.LetterStore, seq uint64) (*bus.StoredLetter, error) {
	l, err := c.Letters().Get(ctx, store, seq)
	if err != nil {
		return nil, letterError(ctx, id, err)
	}
	return l, nil
}

// letterError is err, from reading or deleting the letter SEQ id: an input
// error when there is no such letter.
func letterError(ctx context.Context, id string, err error) error {
	if errors.Is(err, bus.ErrLetterNotFound) {
		return rejected(fmt.Errorf("SEQ %s: %w (see pace dead-letters list)", id, err))
	}
	return signalled(ctx, err)
}

// printLetter prints letter l and body, the message it keeps, or why that
// is unavailable (bodyErr).
func printLetter(w io.Writer, l *bus.StoredLetter, body []byte, bodyErr error) error {
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(w, "%-12s %s\n", name+":", safeText(value))
		}
	}
	field("seq", l.ID())
	field("job", l.Job)
	field("item", l.ItemID)
	field("reason", string(l.Reason))
	if l.Deliveries > 0 {
		field("deliveries", strconv.Itoa(l.Deliveries))
	}
	field("last error", l.LastError)
	field("subject", l.Subject)
	if l.Sequence != 0 {
		field("sequence", strconv.FormatUint(l.Sequence, 10)+" (the message's, in its own stream)")
	}
	field("at", l.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	keys := make([]string, 0, len(l.Header))
	for k := range l.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field("header", k+": "+strings.Join(l.Header[k], ", "))
	}
	field("body object", l.RawObject)
	if bodyErr != nil {
		_, err := fmt.Fprintf(w, "message:     unavailable: %s\n             (%s)\n", safeText(bodyErr.Error()), deleteHint(l.ID()))
		return err
	}
	if printable(body) {
		_, err := fmt.Fprintf(w, "message (%d bytes, text):\n%s\n", len(body), body)
		return err
	}
	_, err := fmt.Fprintf(w, "message (%d bytes, not printable text: hex dump; --raw writes the bytes):\n%s",
		len(body), hex.Dump(body))
	return err
}

// printable tells whether b is UTF-8 text with no control character other
// than newline and tab, safe to print as it is.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}

// safeText is s, quoted with Go escapes unless it is printable on one line.
func safeText(s string) string {
	if printable([]byte(s)) && !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strconv.Quote(s)
}
