package execpool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/internal/execpool"
	"github.com/pace-platform/pace/internal/lines"
	"github.com/pace-platform/pace/schemas"
)

// Scripts run by the tests' processes; each notes its pid in $DIR/pids.
const (
	// cat, one process for every item.
	catScript = `echo $$ >> "$DIR/pids"; exec cat`
	// echo each line, but die on "boom", saying so on stderr.
	crashScript = `echo $$ >> "$DIR/pids"; while IFS= read -r l; do
	  if [ "$l" = boom ]; then echo "dying on $l" >&2; exit 3; fi; echo "$l"; done`
	// echo each line, but hang on "hang", deaf to SIGTERM, in a child of the shell.
	hangScript = `trap '' TERM; echo $$ >> "$DIR/pids"; while IFS= read -r l; do
	  if [ "$l" = hang ]; then sleep 1000; fi; echo "$l"; done`
	// answer every JSON line with another item's id.
	wrongIDScript = `echo $$ >> "$DIR/pids"; while IFS= read -r l; do echo '{"id":"not-yours","result":"x"}'; done`
	// answer every JSON line with a line that is not JSON.
	garbageScript = `echo $$ >> "$DIR/pids"; while IFS= read -r l; do echo '{"garbage'; done`
	// json answers after a line of its own before and after each.
	chattyScript = `echo $$ >> "$DIR/pids"; while IFS= read -r l; do echo "working on it"
	  id=$(echo "$l" | sed 's/^{"id":"\([^"]*\)".*/\1/'); echo "{\"id\":\"$id\",\"result\":\"done $id\"}"; echo "after $id"; done`
)

// testPool is a pool whose processes note their pids in dir.
type testPool struct {
	*execpool.Pool
	dir string
	log *lockedBuffer
}

// newPool starts a pool of script in mode; it is closed when the test ends
// (Close is idempotent, so a test may close it first).
func newPool(t *testing.T, script string, mode execpool.Mode, processes int) *testPool {
	t.Helper()
	dir := t.TempDir()
	log := &lockedBuffer{}
	cfg := execpool.Config{Command: script, Mode: mode, Processes: processes, KillDelay: 200 * time.Millisecond,
		Env: append(os.Environ(), "DIR="+dir)}
	p, err := execpool.New(cfg, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &testPool{Pool: p, dir: dir, log: log}
}

// pids returns the pids of the processes started so far, in order.
func (tp *testPool) pids(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tp.dir, "pids"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func item(id, payload string) *schemas.WorkItem {
	return &schemas.WorkItem{ID: id, Job: "j", Payload: payload}
}

// mustHandle runs payload through p and requires it back.
func mustHandle(t *testing.T, p *testPool, id, payload, want string) {
	t.Helper()
	got, err := p.Handle(context.Background(), item(id, payload))
	if err != nil || got != want {
		t.Fatalf("Handle(%q) = %q, %v; want %q", payload, got, err, want)
	}
}

// groupGone reports whether the process group led by pid has no process left.
func groupGone(pid int) bool { return errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH) }

// eventually polls cond for up to a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// noLeak fails the test unless the goroutines return to their number before
// the pool, once the pool is closed.
func noLeak(t *testing.T, p *testPool, before int) {
	t.Helper()
	p.Close()
	eventually(t, "the pool's goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	for _, pid := range p.pids(t) {
		// Close returns once each shell is reaped; its children, killed
		// with it, are reaped by init soon after.
		eventually(t, fmt.Sprintf("process group %d to end", pid), func() bool { return groupGone(pid) })
	}
}

func TestLinesOneProcessPerSlot(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newPool(t, catScript, execpool.Lines, 3)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := range 100 {
				id := fmt.Sprintf("w%d-%d", w, i)
				got, err := p.Handle(context.Background(), item(id, "payload "+id+"\r"))
				if err != nil || got != "payload "+id {
					t.Errorf("Handle(%s) = %q, %v; want its payload without \\r", id, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := len(p.pids(t)); n < 1 || n > 3 {
		t.Errorf("%d processes served 300 items on 3 slots, want 1 to 3", n)
	}
	mustHandle(t, p, "empty", "", "")
	noLeak(t, p, before)
}

func TestLinesRefusesNewline(t *testing.T) {
	p := newPool(t, catScript, execpool.Lines, 1)
	if _, err := p.Handle(context.Background(), item("i", "two\nlines")); !errors.Is(err, execpool.ErrNewline) {
		t.Fatalf("err = %v, want ErrNewline", err)
	}
	if pids := p.pids(t); len(pids) != 0 {
		t.Errorf("an item that cannot be sent started %d processes", len(pids))
	}
	mustHandle(t, p, "ok", "one line", "one line")
}

func TestCrashFailsOnlyItsItem(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newPool(t, crashScript, execpool.Lines, 1)
	mustHandle(t, p, "a", "a", "a")
	_, err := p.Handle(context.Background(), item("boom", "boom"))
	if !errors.Is(err, execpool.ErrProcessFailed) || !strings.Contains(err.Error(), "exit status 3") ||
		!strings.Contains(err.Error(), "dying on boom") {
		t.Fatalf("err = %v, want ErrProcessFailed with the exit status and the end of stderr", err)
	}
	// Logged as the item's, once the process has exited (its standard error is copied then).
	if log := p.log.String(); !strings.Contains(log, `msg="item stderr" exec_mode=lines item=boom line="dying on boom"`) {
		t.Errorf("the process's stderr is not in the log as item boom's:\n%s", log)
	}
	mustHandle(t, p, "b", "b", "b")
	if pids := p.pids(t); len(pids) != 2 {
		t.Errorf("pids = %v, want the crashed process and its replacement", pids)
	}
	noLeak(t, p, before)
}

func TestHangIsKilledWhenTheItemEnds(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newPool(t, hangScript, execpool.Lines, 1)
	mustHandle(t, p, "a", "a", "a")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := p.Handle(ctx, item("hang", "hang"))
	if !errors.Is(err, execpool.ErrProcessFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrProcessFailed wrapping the deadline", err)
	}
	hung := p.pids(t)[0]
	// SIGTERM is ignored: SIGKILL, KillDelay later, ends the shell and its sleep.
	eventually(t, "the hung process group to be killed", func() bool { return groupGone(hung) })
	mustHandle(t, p, "b", "b", "b")
	noLeak(t, p, before)
}

// TestSetKillDelayLengthensTheGrace: a job's termination grace, set once the
// worker knows it, is what a stopped process gets before SIGKILL.
func TestSetKillDelayLengthensTheGrace(t *testing.T) {
	p := newPool(t, hangScript, execpool.Lines, 1) // KillDelay 200ms
	p.SetKillDelay(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Handle(ctx, item("hang", "hang")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	hung := p.pids(t)[0]
	time.Sleep(500 * time.Millisecond) // past the 200ms of the config, well within the 2s set: SIGTERM alone so far
	if groupGone(hung) {
		t.Fatal("the process group was killed before the kill delay set")
	}
	eventually(t, "the hung process group to be killed", func() bool { return groupGone(hung) })
}

// TestStderrIsLoggedAsItsItems: what a process writes on its standard error
// while it holds an item (its start-up for its first) is logged with that
// item's id, within the budget of one item.
func TestStderrIsLoggedAsItsItems(t *testing.T) {
	p := newPool(t, `echo starting >&2; while IFS= read -r l; do
	  if [ "$l" = loud ]; then i=0; while [ $i -lt 150 ]; do echo "noise $i" >&2; i=$((i+1)); done; fi
	  echo "note: $l" >&2; echo "$l"; done`, execpool.Lines, 1)
	mustHandle(t, p, "a", "a", "a")
	mustHandle(t, p, "b", "loud", "loud")
	mustHandle(t, p, "c", "c", "c")
	p.Close() // the rest of its standard error is copied once it exits
	log := p.log.String()
	for _, want := range []string{`msg="item stderr" exec_mode=lines item=a line=starting`,
		`msg="item stderr" exec_mode=lines item=a line="note: a"`, `item=b line="noise 99"`,
		`msg="item stderr cut" exec_mode=lines item=b cut_bytes=`, `item=c line="note: c"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, `line="noise 100"`) || strings.Contains(log, `item=b line="note: loud"`) {
		t.Errorf("item b's lines past its budget of %d were logged:\n%s", lines.ItemLines, log)
	}
}

func TestCancelledWhileWaitingForAProcess(t *testing.T) {
	p := newPool(t, hangScript, execpool.Lines, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := p.Handle(ctx, item("hang", "hang")); done <- err }()
	eventually(t, "the first process", func() bool { return len(p.pids(t)) == 1 })
	waiting, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if _, err := p.Handle(waiting, item("b", "b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second item on a busy pool of 1: err = %v, want its deadline", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("hung item: err = %v, want canceled", err)
	}
}

// TestJSONOtherStdoutIsLogged: in JSON mode, stdout lines that are not JSON
// objects are the process's own output, logged as its item's; the process
// keeps serving, through a line written after an answer too.
func TestJSONOtherStdoutIsLogged(t *testing.T) {
	p := newPool(t, chattyScript, execpool.JSON, 1)
	mustHandle(t, p, "a", "x", "done a")
	mustHandle(t, p, "b", "y", "done b")
	// A line written after an answer is logged too, as the item its
	// process holds when the line is read: a or b.
	for _, want := range []string{`msg="item stdout" exec_mode=json item=a line="working on it"`,
		`msg="item stdout" exec_mode=json item=b line="working on it"`, `line="after a"`} {
		if log := p.log.String(); !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if pids := p.pids(t); len(pids) != 1 {
		t.Errorf("pids = %v, want one process serving both items", pids)
	}
}

func TestJSONBrokenProcessIsReplaced(t *testing.T) {
	tests := []struct {
		name, script, want string
	}{
		{"wrong id", wrongIDScript, `carries id "not-yours"`},
		{"garbage", garbageScript, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			p := newPool(t, tt.script, execpool.JSON, 1)
			for i := range 2 {
				_, err := p.Handle(context.Background(), item("i"+strconv.Itoa(i), "x"))
				if !errors.Is(err, execpool.ErrProcessFailed) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want ErrProcessFailed: %s", err, tt.want)
				}
			}
			if pids := p.pids(t); len(pids) != 2 {
				t.Errorf("pids = %v, want one process per broken answer", pids)
			}
			noLeak(t, p, before)
		})
	}
}

func TestJSONWithJQ(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is not installed")
	}
	p := newPool(t, `echo $$ >> "$DIR/pids"; exec jq -c --unbuffered '
	  if .payload == "bad" then {id, error: "refused: \(.payload)"}
	  elif .payload == "n" then {id, result: 42}
	  else {id, result: (.payload | ascii_upcase)} end'`, execpool.JSON, 1)
	mustHandle(t, p, "1", "hello <world> é\n\"x\"", "HELLO <WORLD> é\n\"X\"")
	mustHandle(t, p, "2", "n", "42")
	if _, err := p.Handle(context.Background(), item("3", "bad")); err == nil || errors.Is(err, execpool.ErrProcessFailed) ||
		err.Error() != "refused: bad" {
		t.Fatalf("err = %v, want the command's error alone", err)
	}
	mustHandle(t, p, "4", "ok", "OK")
	if pids := p.pids(t); len(pids) != 1 {
		t.Errorf("pids = %v, want one process: an error answer keeps it", pids)
	}
}

func TestExitedIdleProcessIsReplacedBeforeTheItem(t *testing.T) {
	// Each process answers one line and exits: the next item must not fail.
	p := newPool(t, `echo $$ >> "$DIR/pids"; IFS= read -r l; echo "$l"`, execpool.Lines, 1)
	mustHandle(t, p, "a", "a", "a")
	first := p.pids(t)[0]
	eventually(t, "the first process to exit", func() bool { return groupGone(first) })
	mustHandle(t, p, "b", "b", "b")
}

func TestProcessThatClosedItsInputIsReplacedBeforeTheItem(t *testing.T) {
	// Each process closes its input once it has read one line, answers it
	// and lives on: the pool sees it running, and only the write of the
	// next item tells.
	p := newPool(t, `echo $$ >> "$DIR/pids"; IFS= read -r l; exec 0<&-; echo "$l"; sleep 60`, execpool.Lines, 1)
	mustHandle(t, p, "a", "a", "a")
	mustHandle(t, p, "b", "b", "b")
	if pids := p.pids(t); len(pids) != 2 {
		t.Errorf("pids = %v, want a second process for the second item", pids)
	}
}

func TestBufferingCommandIsReported(t *testing.T) {
	dir := t.TempDir()
	log := &lockedBuffer{}
	p, err := execpool.New(execpool.Config{Command: "tr a-z A-Z", Mode: execpool.Lines, KillDelay: 100 * time.Millisecond,
		StallWarning: 50 * time.Millisecond, Env: append(os.Environ(), "DIR="+dir)}, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := p.Handle(ctx, item("a", "a")); done <- err }()
	eventually(t, "the stall warning", func() bool { return strings.Contains(log.String(), "stdbuf -oL") })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want canceled", err)
	}
}

func TestClosedPool(t *testing.T) {
	p := newPool(t, catScript, execpool.Lines, 2)
	mustHandle(t, p, "a", "a", "a")
	p.Close()
	if _, err := p.Handle(context.Background(), item("b", "b")); !errors.Is(err, execpool.ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	for _, pid := range p.pids(t) {
		if !groupGone(pid) {
			t.Errorf("process %d outlived Close", pid)
		}
	}
}

func TestCloseFailsTheItemsInFlight(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newPool(t, hangScript, execpool.Lines, 1)
	done := make(chan error, 1)
	go func() { _, err := p.Handle(context.Background(), item("hang", "hang")); done <- err }()
	eventually(t, "the process", func() bool { return len(p.pids(t)) == 1 })
	noLeak(t, p, before+1) // the goroutine above ends with its item
	if err := <-done; !errors.Is(err, execpool.ErrProcessFailed) {
		t.Errorf("err = %v, want ErrProcessFailed", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  execpool.Config
		want string
	}{
		{"no command", execpool.Config{Mode: execpool.Lines}, "command is required"},
		{"item mode", execpool.Config{Command: "cat", Mode: "item"}, `mode "item"`},
		{"negative processes", execpool.Config{Command: "cat", Mode: execpool.JSON, Processes: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := execpool.New(tt.cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for the processes' and the test's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}
