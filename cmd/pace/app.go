package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes of every pace command.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2 // the only code that prints usage
	exitRejected    = 3 // input refused by validation
	exitInterrupted = 130
)

// exitError carries an exit code other than exitFailure.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, args...)}
}

func rejected(err error) error { return &exitError{exitRejected, err} }

// app holds what every command shares: IO streams and the logger.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	logLevel       string
	logFormat      string
	log            *slog.Logger
}

// run executes the pace command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	code := exitFailure
	if errors.As(err, &ee) {
		code = ee.code
	} else if strings.HasPrefix(err.Error(), "unknown command") {
		code = exitUsage // cobra has no typed error for an unknown command
	}
	if ctx.Err() != nil && code == exitFailure {
		code = exitInterrupted
	}
	fmt.Fprintln(stderr, "Error:", err)
	if code == exitUsage {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// exactArgs is cobra.ExactArgs returning a usage error that names the
// arguments of the command's Use line (e.g. "pace push JOB").
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == n:
			return nil
		case n == 0:
			return usageError("%s takes no arguments, got %q", cmd.CommandPath(), args)
		case len(args) < n:
			missing := "arguments"
			if names := strings.Fields(cmd.Use)[1:]; len(names) >= n {
				missing = strings.Join(names[len(args):n], " ")
			}
			return usageError("%s takes %d argument(s), got %d: missing %s (usage: %s)",
				cmd.CommandPath(), n, len(args), missing, cmd.UseLine())
		default:
			return usageError("%s takes %d argument(s), got %d: unexpected %q (usage: %s)",
				cmd.CommandPath(), n, len(args), args[n:], cmd.UseLine())
		}
	}
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "pace",
		Short: "Run jobs that finish by their deadline at the lowest cost",
		Long: `Pace runs batch and streaming jobs over NATS JetStream and scales their
workers so that each job meets its deadline, while API Priority and Fairness
keeps any tenant from starving the others.

Start it with 'pace up' (or try 'pace up --demo'). Then either submit a
job with a deadline and let Pace run and scale its workers ('pace submit',
'pace status', 'pace report'), or use a job's queue directly: push items
with 'pace push', process them with 'pace worker' and read results with
'pace results'. Most flags can also be set by an environment variable,
named in their help (PACE_ and the flag's name).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			if err := a.setupLogger(); err != nil {
				return err
			}
			warnDeprecated(cmd, a.log)
			return nil
		},
	}
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "auto", "log format: text, json or auto (text on a terminal)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{exitUsage, err} })
	root.AddCommand(newUpCmd(a), newPushCmd(a), newWorkerCmd(a), newResultsCmd(a), newDecisionsCmd(a), newVersionCmd(a), newAPFCmd(a), newGateCmd(a), newStageCmd(a), newSimCmd(a),
		newSubmitCmd(a), newJobsCmd(a), newStatusCmd(a), newStopCmd(a), newTerminateCmd(a), newDeleteCmd(a), newLogsCmd(a), newReportCmd(a), newDeadLettersCmd(a))
	annotateEnv(root)
	return root
}

func (a *app) setupLogger() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usageError("--log-level %q: want debug, info, warn or error", a.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.logFormat {
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
	case "text":
		a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
	case "auto":
		if f, ok := a.stderr.(*os.File); ok && isTerminal(f) {
			a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
		} else {
			a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
		}
	default:
		return usageError("--log-format %q: want text, json or auto", a.logFormat)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// envAnnotation overrides the environment variable of a flag; "" means none.
const envAnnotation = "pace-env"

// noEnv exempts the named flags of fs from the environment rule.
func noEnv(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		_ = fs.SetAnnotation(n, envAnnotation, []string{""})
	}
}

// envName is the environment variable read for a flag: its envAnnotation, or
// PACE_ and the flag in upper snake case; "" when it reads none.
func envName(f *pflag.Flag) string {
	if v := f.Annotations[envAnnotation]; len(v) == 1 {
		return v[0]
	}
	return "PACE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// environment variable: flag beats environment beats default.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" || envName(f) == "" {
			return
		}
		if v, ok := os.LookupEnv(envName(f)); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = usageError("%s=%q: %v", envName(f), v, serr)
			}
		}
	})
	return err
}

// deprecatedAnnotation holds the flag to use instead of a deprecated one.
const deprecatedAnnotation = "pace-deprecated"

// deprecate hides a flag kept for old command lines in favour of instead.
// Using it logs a warning; pflag's MarkDeprecated would print one through
// cobra on stdout, into the output of -o json.
func deprecate(fs *pflag.FlagSet, name, instead string) {
	_ = fs.MarkHidden(name)
	_ = fs.SetAnnotation(name, deprecatedAnnotation, []string{instead})
}

// warnDeprecated logs each deprecated flag set on cmd's command line.
func warnDeprecated(cmd *cobra.Command, log *slog.Logger) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if v := f.Annotations[deprecatedAnnotation]; len(v) == 1 {
			log.Warn("flag deprecated", "flag", "--"+f.Name, "use", v[0])
		}
	})
}

// choiceValue is a string flag limited to a few values, so a bad one is
// refused where it was set: on the command line or in its environment
// variable (PACE_OUTPUT serves commands with different formats).
type choiceValue struct {
	p       *string
	choices []string
}

// choiceVarP registers a choiceValue flag; usage gets the choices appended.
func choiceVarP(fs *pflag.FlagSet, p *string, name, short, value, usage string, choices ...string) {
	*p = value
	c := &choiceValue{p: p, choices: choices}
	fs.VarP(c, name, short, usage+": "+c.want())
}

// want lists the choices: "a, b or c".
func (c *choiceValue) want() string {
	n := len(c.choices)
	if n == 1 {
		return c.choices[0]
	}
	return strings.Join(c.choices[:n-1], ", ") + " or " + c.choices[n-1]
}

func (c *choiceValue) Set(v string) error {
	if !slices.Contains(c.choices, v) {
		return fmt.Errorf("want %s", c.want())
	}
	*c.p = v
	return nil
}

func (c *choiceValue) String() string { return *c.p }
func (c *choiceValue) Type() string   { return "string" }

// annotateEnv appends each flag's environment variable to its help text.
func annotateEnv(cmd *cobra.Command) {
	note := func(f *pflag.Flag) {
		if f.Name != "help" && envName(f) != "" && !strings.Contains(f.Usage, "(env ") {
			f.Usage += " (env " + envName(f) + ")"
		}
	}
	cmd.LocalFlags().VisitAll(note)
	cmd.PersistentFlags().VisitAll(note)
	for _, c := range cmd.Commands() {
		annotateEnv(c)
	}
}

// signalled wraps an error returned because ctx ended as an interruption.
func signalled(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &exitError{exitInterrupted, err}
	}
	return err
}
