package execpool

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pace-platform/pace/internal/lines"
	"github.com/pace-platform/pace/schemas"
)

// stderrTail bounds the standard error kept in an item's error.
const stderrTail = 2048

// PerItem runs a command with sh -c once per item (`pace worker`'s item
// mode): the payload is its standard input, its standard output without
// trailing newlines the result, exit status 0 success; a failure's error
// keeps the exit status and the end of its standard error. A cancelled item
// (past the job's worker.timeout, or the worker stopping past its grace)
// gets SIGTERM, then SIGKILL the kill delay later, with every program its
// shell started (it is its own process group). What the command writes
// on its standard error is logged line by line, whether it succeeded,
// failed or hung (at most lines.ItemLines lines and lines.ItemBytes bytes an
// item): the local runtime and the pods' logs bring it to the job's log.
type PerItem struct {
	command   string
	env       []string
	log       *slog.Logger
	killDelay atomic.Int64 // nanoseconds
}

// NewPerItem returns a runner of command whose processes get env, plus the
// item's job and id (PACE_JOB, PACE_ITEM_ID); log takes their standard
// error (nil: discarded).
func NewPerItem(command string, env []string, log *slog.Logger) *PerItem {
	c := &PerItem{command: command, env: env, log: log}
	c.killDelay.Store(int64(defaultKillDelay))
	return c
}

// SetKillDelay sets the time between SIGTERM and SIGKILL for the items
// started from now on (a job's termination grace, once the worker knows it).
func (c *PerItem) SetKillDelay(d time.Duration) { c.killDelay.Store(int64(d)) }

// Handle runs the command on item; it is a bus.Handler.
func (c *PerItem) Handle(ctx context.Context, item *schemas.WorkItem) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", c.command)
	cmd.Stdin = strings.NewReader(item.Payload)
	cmd.Env = append(c.env[:len(c.env):len(c.env)], "PACE_JOB="+item.Job, "PACE_ITEM_ID="+item.ID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The command is its own process group, so that a cancelled item stops
	// the programs its shell started too: SIGTERM to the group, SIGKILL the
	// kill delay later. WaitDelay is only the backstop for pipes held open.
	cmd.SysProcAttr = procAttr()
	delay := time.Duration(c.killDelay.Load())
	var kill *time.Timer
	cmd.Cancel = func() error {
		kill = time.AfterFunc(delay, func() { _ = signalGroup(cmd.Process, syscall.SIGKILL) })
		return signalGroup(cmd.Process, syscall.SIGTERM)
	}
	cmd.WaitDelay = delay + time.Second
	err := cmd.Run()
	if kill != nil { // set by Cancel, which Run waits for
		kill.Stop()
	}
	c.logStderr(item.ID, stderr.Bytes())
	if err != nil {
		tail := stderr.Bytes()
		if len(tail) > stderrTail {
			tail = tail[len(tail)-stderrTail:]
		}
		if msg := strings.TrimSpace(string(tail)); msg != "" {
			return "", fmt.Errorf("%s: %w: %s", c.command, err, msg)
		}
		return "", fmt.Errorf("%s: %w", c.command, err)
	}
	return strings.TrimRight(stdout.String(), "\r\n"), nil
}

// logStderr logs an item's standard error, a record per line, within the
// bounds of lines.Budget, and says how much was cut beyond them.
func (c *PerItem) logStderr(item string, out []byte) {
	if c.log == nil || len(out) == 0 {
		return
	}
	var budget lines.Budget
	w := &lines.Writer{Emit: func(line string) {
		if budget.Keep(line) {
			c.log.Info("item stderr", "item", item, "line", line)
		}
	}}
	_, _ = w.Write(out)
	_ = w.Close()
	if budget.Cut > 0 {
		c.log.Warn("item stderr cut", "item", item, "cut_bytes", budget.Cut, "kept_lines", budget.Lines)
	}
}
