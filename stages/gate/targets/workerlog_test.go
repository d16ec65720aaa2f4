package targets_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
	"github.com/pace-platform/pace/stages/gate/targets/local"
)

// TestWorkerOutputReachesTheJobLog: what a local worker writes on stdout and
// stderr is in its job's log, each line tagged with the replica; a flood is
// cut to the rate limit and the cut is said in the log.
func TestWorkerOutputReachesTheJobLog(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	out := targets.NewWorkerLog(c, targets.WithLogger(log))
	bustest.Run(t, out.Run)
	rt, err := local.New(local.Config{Binary: paceBin, NATSURL: s.ClientURL(), Grace: time.Second, Output: out.Line}, local.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, rt.Run)
	ctx := context.Background()

	// A command that cannot start, as a typo makes it: sh says why on stderr.
	broken := local.Worker{Job: "typo", Command: []string{"sh", "-c", "echo starting; no-such-command-xyz; exit 127"}}
	if _, err := rt.Scale(ctx, broken, 1); err != nil {
		t.Fatal(err)
	}
	// A flood: far more lines at once than the limit lets through.
	flood := local.Worker{Job: "chatty", Command: []string{"sh", "-c", "seq 1 5000; sleep 60"}}
	if _, err := rt.Scale(ctx, flood, 1); err != nil {
		t.Fatal(err)
	}

	var typo []*schemas.LogLine
	bustest.Eventually(t, time.Minute, "the broken command's output in its log", func() bool {
		typo = logLines(t, c, "typo")
		return has(typo, "starting") && has(typo, "no-such-command-xyz")
	})
	for _, l := range typo {
		if l.Source != "typo-0" {
			t.Errorf("line %q from %q, want the replica typo-0", l.Line, l.Source)
		}
	}
	if _, err := rt.Scale(ctx, broken, 0); err != nil {
		t.Fatal(err)
	}

	var chatty []*schemas.LogLine
	bustest.Eventually(t, time.Minute, "the flood's first lines and the cut", func() bool {
		_, _ = rt.Scale(ctx, flood, 0) // its lines are all written: end it so the cut is reported
		out.Line("chatty", "chatty-0", "after")
		chatty = logLines(t, c, "chatty")
		return has(chatty, "1") && has(chatty, "lines of worker output dropped")
	})
	if n := len(chatty); n > 1000 {
		t.Errorf("%d lines of 5000 logged: the rate limit let too many through", n)
	}
}

func logLines(t *testing.T, c *bus.Client, job string) []*schemas.LogLine {
	t.Helper()
	var lines []*schemas.LogLine
	for l, err := range c.Outputs().Logs(context.Background(), job, false) {
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	return lines
}

func has(lines []*schemas.LogLine, substr string) bool {
	for _, l := range lines {
		if strings.Contains(l.Line, substr) {
			return true
		}
	}
	return false
}
