package execpool_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/internal/execpool"
	"github.com/pace-platform/pace/schemas"
)

// TestPerItemRunsTheCommandOnEachItem: the payload in, the output without
// its trailing newlines out, the item's job and id in the environment.
func TestPerItemRunsTheCommandOnEachItem(t *testing.T) {
	run := execpool.NewPerItem(`printf '%s/%s/' "$PACE_JOB" "$PACE_ITEM_ID"; tr a-z A-Z; printf '\r\n\n'`, os.Environ(), nil)
	out, err := run.Handle(t.Context(), &schemas.WorkItem{Job: "j1", ID: "i7", Payload: "hello"})
	if err != nil || out != "j1/i7/HELLO" {
		t.Fatalf("Handle = %q, %v; want %q", out, err, "j1/i7/HELLO")
	}
}

// TestPerItemFailureKeepsTheStatusAndTheEndOfStderr: a failing command's
// error holds its exit status and the last 2 KiB of its standard error.
func TestPerItemFailureKeepsTheStatusAndTheEndOfStderr(t *testing.T) {
	run := execpool.NewPerItem(`head -c 5000 /dev/zero | tr '\0' x >&2; echo " the end" >&2; exit 3`, os.Environ(), nil)
	_, err := run.Handle(t.Context(), &schemas.WorkItem{Job: "j", ID: "i"})
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("err = %v, want exit status 3", err)
	}
	if msg := err.Error(); !strings.HasSuffix(msg, "x the end") || strings.Count(msg, "x") > 2048 {
		t.Errorf("err = %.80q… (%d bytes), want at most 2 KiB of stderr's end", msg, len(msg))
	}
}

// TestPerItemStopsACancelledItem: an item whose context ends gets SIGTERM,
// and SIGKILL the kill delay later when it ignores it, and so do the
// programs its shell started: none is left running.
func TestPerItemStopsACancelledItem(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	run := execpool.NewPerItem(`trap '' TERM; sleep 1000 & echo $! > "$PIDFILE"; wait`, append(os.Environ(), "PIDFILE="+pidFile), nil)
	run.SetKillDelay(100 * time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := run.Handle(ctx, &schemas.WorkItem{Job: "j", ID: "i"})
		done <- err
	}()
	var child int
	for deadline := time.Now().Add(time.Minute); child == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if child == 0 {
		t.Fatal("the command never started its child")
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled item succeeded")
		}
	case <-time.After(time.Minute): // SIGKILL ends it at once; only a lost signal waits this long
		t.Fatal("a cancelled item deaf to SIGTERM was never killed")
	}
	for deadline := time.Now().Add(time.Minute); running(child); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("the command's child %d outlived its cancelled item", child)
		}
	}
}

// running reports whether process pid runs: it exists and is no zombie
// (one its parent, or whoever reaps orphans here, has not reaped yet).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: existing is running
	}
	_, after, _ := strings.Cut(string(stat), ") ") // the name may hold spaces; the state follows it
	return !strings.HasPrefix(after, "Z")
}
