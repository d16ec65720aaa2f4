package main

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
)

// TestExitCodes runs the binary for each documented exit code (0 ok,
// 1 failure, 2 usage, 3 input rejected, 130 interrupted) across commands,
// with nothing running: each code is what a script can rely on.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want int
		says string // in the output, when set
	}{
		{"version", []string{"version"}, exitOK, ""},
		{"help of a command", []string{"decisions", "--help"}, exitOK, ""},
		{"unknown command", []string{"frobnicate"}, exitUsage, ""},
		{"mistyped command", []string{"sumbit"}, exitUsage, "Did you mean this?\n\tsubmit"},
		{"missing argument", []string{"push"}, exitUsage, ""},
		{"extra argument", []string{"status", "a", "b"}, exitUsage, ""},
		{"invalid job id", []string{"decisions", "a.b"}, exitUsage, ""},
		{"invalid choice", []string{"results", "j1", "-o", "yaml"}, exitUsage, ""},
		{"unknown flag", []string{"logs", "j1", "--bogus"}, exitUsage, ""},
		{"invalid up flag", []string{"up", "--max-queued-items", "0"}, exitUsage, ""},
		{"unreadable spec", []string{"submit", "/nonexistent/job.yaml"}, exitRejected, ""},
		{"API unreachable", []string{"status", "j1", "--api", "http://127.0.0.1:1", "--request-timeout", "2s"}, exitFailure, ""},
		{"NATS unreachable", []string{"results", "j1", "--nats", "nats://127.0.0.1:1", "--connect-timeout", "1s"}, exitFailure, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(paceBin, tc.args...)
			out, _ := cmd.CombinedOutput()
			if got := cmd.ProcessState.ExitCode(); got != tc.want {
				t.Errorf("pace %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), got, tc.want, out)
			}
			if !strings.Contains(string(out), tc.says) {
				t.Errorf("pace %s said:\n%s\nwant %q", strings.Join(tc.args, " "), out, tc.says)
			}
		})
	}

	// Interrupted while waiting for a NATS server that never comes.
	cmd := exec.Command(paceBin, "results", "j1", "--nats", "nats://127.0.0.1:1", "--connect-timeout", "0")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 2*time.Minute, "the first connection attempt", func() bool { return strings.Contains(stderr.String(), "retrying") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Errorf("interrupted: %v, want exit %d\n%s", err, exitInterrupted, stderr)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("pace results did not end within a minute of SIGINT")
	}
}
