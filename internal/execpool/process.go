package execpool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pace-platform/pace/internal/lines"
)

// exitWait bounds the wait for the exit status of a process that closed its
// output, for the item's error.
const exitWait = time.Second

// process is one running `sh -c CMD` and the goroutines that serve it.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File      // the write end of its standard input
	stdout *os.File      // the read end of its standard output
	lines  chan line     // its answers, one per line, then one with the read error; read by the item holding it
	exited chan struct{} // closed once it is reaped; waitErr is set before
	stderr *tail
	item   atomic.Pointer[string] // the id of the item it holds, for its standard error

	errR     *os.File      // the read end of its standard error, read by readStderr
	errTaken atomic.Int64  // bytes of standard error taken from the pipe so far
	errRead  atomic.Int64  // of those, bytes logged; never more than errTaken
	errMoved chan struct{} // buffered 1: errRead grew
	errDone  chan struct{} // closed when readStderr has returned

	waitErr  error
	stopping chan struct{} // closed by stop
	stopOnce sync.Once
	stalled  atomic.Bool // its stall was logged
}

// line is one answer of a process, or why there is none.
type line struct {
	text []byte
	err  error
}

// start runs a new process for item; its readers and reaper count in wg.
func (p *Pool) start(item string) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", p.cfg.Command, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("start %s: %w", p.cfg.Command, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("start %s: %w", p.cfg.Command, err)
	}
	pr := &process{stdin: inW, stdout: outR, lines: make(chan line), exited: make(chan struct{}), stopping: make(chan struct{}),
		errR: errR, errMoved: make(chan struct{}, 1), errDone: make(chan struct{})}
	pr.item.Store(&item)
	errLog := &stderrLog{log: p.log, item: &pr.item}
	pr.stderr = &tail{w: &lines.Writer{Emit: errLog.emit}}
	cmd := exec.Command("sh", "-c", p.cfg.Command)
	cmd.Env = p.cfg.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = procAttr()
	err = cmd.Start()
	closeAll(inR, outW, errW) // the child's ends, which it holds now: the readers see EOF once it closes its own
	if err != nil {
		closeAll(inW, outR, errR) // no child
		return nil, fmt.Errorf("start %s: %w", p.cfg.Command, err)
	}
	pr.cmd = cmd
	p.wg.Go(pr.read)
	p.wg.Go(pr.readStderr)
	p.wg.Go(func() {
		pr.waitErr = cmd.Wait()
		t := time.NewTimer(exitWait)
		select {
		case <-pr.errDone:
		case <-t.C: // a program the process started keeps its standard error open
			errR.Close() //nolint:errcheck // ends readStderr
			<-pr.errDone
		}
		t.Stop()
		_ = pr.stderr.w.Close() // its last line, if unfinished
		errLog.flushCut()
		close(pr.exited)
	})
	return pr, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close() //nolint:errcheck // pipe ends no longer used
	}
}

// readStderr passes the process's standard error to its tail (and so to
// the log) until it ends, counting what it has read.
func (pr *process) readStderr() {
	defer close(pr.errDone)
	buf := make([]byte, 4096)
	for {
		n, err := pr.errR.Read(buf)
		if n > 0 {
			pr.errTaken.Add(int64(n))
			_, _ = pr.stderr.Write(buf[:n])
			pr.errRead.Add(int64(n))
			select {
			case pr.errMoved <- struct{}{}:
			default:
			}
		}
		if err != nil {
			pr.errR.Close() //nolint:errcheck // read to its end
			return
		}
	}
}

// drainStderr waits, briefly, until what the process had written on its
// standard error when it answered has been read: the lines it wrote for an
// item before its answer are logged as that item's, not the next one's.
func (pr *process) drainStderr() {
	pending := pendingBytes(pr.errR)
	// What was written before the answer is in the pipe now or taken from
	// it already, logged or not: all of it is logged once errRead reaches
	// this (later writes only make the wait end at drainWait).
	target := pr.errTaken.Load() + int64(pending)
	if pr.errRead.Load() >= target {
		return
	}
	t := time.NewTimer(drainWait)
	defer t.Stop()
	for pr.errRead.Load() < target {
		select {
		case <-pr.errMoved:
		case <-pr.errDone:
			return
		case <-t.C:
			return
		}
	}
}

// drainWait bounds drainStderr.
const drainWait = 100 * time.Millisecond

// read passes the process's output lines to lines until it ends or the
// process is stopped.
func (pr *process) read() {
	r := bufio.NewReaderSize(pr.stdout, 64<<10)
	for {
		text, err := readLine(r)
		select {
		case pr.lines <- line{text, err}:
		case <-pr.stopping:
			return
		}
		if err != nil {
			return
		}
	}
}

// readLine returns the next line of r without its newline; a line longer
// than maxAnswer is an error.
func readLine(r *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		frag, err := r.ReadSlice('\n')
		if err == nil {
			if long == nil {
				return append([]byte(nil), frag[:len(frag)-1]...), nil
			}
			return append(long, frag[:len(frag)-1]...), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
		if len(long)+len(frag) > maxAnswer {
			return nil, fmt.Errorf("answer longer than %d bytes", maxAnswer)
		}
		long = append(long, frag...)
	}
}

// unread is the failure of a process that had closed its input (exited,
// most often) before it was sent an item: no answer came from it, so
// another process may take the item.
type unread struct{ error }

func (u unread) Unwrap() error { return u.error }

// call sends an item's line and returns the answer line. In JSON mode a
// line that is not a JSON object is the process's own output: it is logged
// as the item's ("item stdout", within a lines.Budget) and the answer is
// still awaited. It fails, with ErrProcessFailed, when the process ends, is
// stopped or writes a line too long; ctx ending stops the process.
func (p *Pool) call(ctx context.Context, pr *process, item string, req []byte) ([]byte, error) {
	cancelled := context.AfterFunc(ctx, func() { p.discard(pr) })
	defer cancelled()
	if p.cfg.StallWarning > 0 && !pr.stalled.Load() {
		stall := time.AfterFunc(p.cfg.StallWarning, func() {
			if !pr.stalled.Swap(true) {
				p.log.Warn("process has not answered an item yet: if its command buffers its output when it is a pipe, "+
					"make it flush each line (stdbuf -oL, sed -u, grep --line-buffered, python -u, jq --unbuffered, mawk -W interactive)",
					"pid", pr.cmd.Process.Pid, "waited", p.cfg.StallWarning.String())
			}
		})
		defer stall.Stop()
	}
	if _, err := pr.stdin.Write(req); err != nil {
		if ctx.Err() != nil {
			return nil, p.cancelled(ctx)
		}
		failed := pr.failure(fmt.Errorf("write item: %w", err))
		if errors.Is(err, syscall.EPIPE) {
			return nil, unread{failed}
		}
		return nil, failed
	}
	var other lines.Budget // json mode: stdout lines that are not answers
	for {
		l, err := p.next(ctx, pr)
		if err != nil || p.cfg.Mode != JSON || isObject(l) {
			if other.Cut > 0 {
				p.log.Warn("item stdout cut", "item", item, "cut_bytes", other.Cut, "kept_lines", other.Lines)
			}
			return l, err
		}
		if other.Keep(string(l)) {
			p.log.Info("item stdout", "item", item, "line", string(l))
		}
	}
}

// next returns the process's next output line for the item that holds it.
func (p *Pool) next(ctx context.Context, pr *process) ([]byte, error) {
	select {
	case l := <-pr.lines:
		switch {
		case l.err == nil:
			return l.text, nil
		case ctx.Err() != nil: // the output ended because the process was stopped
			return nil, p.cancelled(ctx)
		case errors.Is(l.err, io.EOF) || errors.Is(l.err, os.ErrClosed):
			return nil, pr.failure(errors.New("closed its output before answering"))
		default:
			return nil, pr.failure(l.err)
		}
	case <-ctx.Done():
		return nil, p.cancelled(ctx)
	case <-pr.stopping:
		if ctx.Err() != nil {
			return nil, p.cancelled(ctx)
		}
		return nil, fmt.Errorf("%w: stopped before answering (the pool is closing)", ErrProcessFailed)
	}
}

// cancelled is the error of an item whose context ended while its process worked.
func (p *Pool) cancelled(ctx context.Context) error {
	return fmt.Errorf("%w: stopped, the item's context ended: %w", ErrProcessFailed, context.Cause(ctx))
}

// failure describes a process that failed cause, with its exit status and
// the end of its standard error once it has exited.
func (pr *process) failure(cause error) error {
	t := time.NewTimer(exitWait)
	defer t.Stop()
	select {
	case <-pr.exited:
	case <-t.C:
		return fmt.Errorf("%w: %w", ErrProcessFailed, cause)
	}
	msg := fmt.Sprintf("%v: process exited", cause)
	if pr.waitErr != nil {
		msg = fmt.Sprintf("%v: %v", cause, pr.waitErr)
	}
	if end := strings.TrimSpace(pr.stderr.String()); end != "" {
		msg += ": " + end
	}
	return fmt.Errorf("%w: %s", ErrProcessFailed, msg)
}

// healthy reports whether an idle process may take an item: it has not
// exited, and no answer or end of output waits unread. In JSON mode, lines
// of its own output waiting are logged as its last item's.
func (pr *process) healthy(log *slog.Logger, mode Mode) bool {
	for {
		select {
		case <-pr.exited:
			return false
		case <-pr.stopping:
			return false
		case l := <-pr.lines:
			if l.err == nil && mode == JSON && !isObject(l.text) {
				log.Info("item stdout", "item", *pr.item.Load(), "line", string(clip(l.text)))
				continue
			}
			if l.err == nil {
				log.Warn("process wrote a line no item asked for: stopping it", "pid", pr.cmd.Process.Pid, "line", string(clip(l.text)))
			}
			return false
		default:
			return true
		}
	}
}

// stop ends the process once: it closes its input, sends SIGTERM to its
// group and, in a goroutine counted in wg, SIGKILL once it has exited (to
// what else of the group is left) or killDelay later.
func (pr *process) stop(wg *sync.WaitGroup, killDelay time.Duration) {
	pr.stopOnce.Do(func() {
		close(pr.stopping)
		pr.stdin.Close() //nolint:errcheck // ends a blocked write; a filter sees end of input
		_ = signalGroup(pr.cmd.Process, syscall.SIGTERM)
		wg.Go(func() {
			t := time.NewTimer(killDelay)
			defer t.Stop()
			select {
			case <-pr.exited:
			case <-t.C:
			}
			_ = signalGroup(pr.cmd.Process, syscall.SIGKILL)
			<-pr.exited
			pr.stdout.Close() //nolint:errcheck // ends the reader if a program of the group escaped and holds the pipe
		})
	})
}

// tail forwards a process's standard error to w and keeps its end for the
// error of an item whose process dies. Only readStderr writes to it.
type tail struct {
	w io.WriteCloser

	mu  sync.Mutex
	end []byte // guarded by mu; the last tailSize bytes
}

// tailSize bounds the standard error kept for an item's error.
const tailSize = 2048

func (t *tail) Write(b []byte) (int, error) {
	_, _ = t.w.Write(b) // a failed forward must not fail the process
	t.mu.Lock()
	defer t.mu.Unlock()
	t.end = append(t.end, b...)
	if len(t.end) > tailSize {
		t.end = append(t.end[:0], t.end[len(t.end)-tailSize:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.end)
}

// stderrLog logs a process's standard error, a record per line: "item
// stderr" with the id of the item the process held when the line was read,
// at most a lines.Budget an item. Its methods run on readStderr's goroutine,
// but flushCut, which runs after it.
type stderrLog struct {
	log    *slog.Logger
	item   *atomic.Pointer[string]
	last   string // the item of the budget
	budget lines.Budget
}

func (s *stderrLog) emit(line string) {
	if id := *s.item.Load(); id != s.last {
		s.flushCut()
		s.last, s.budget = id, lines.Budget{}
	}
	if s.budget.Keep(line) {
		s.log.Info("item stderr", "item", s.last, "line", line)
	}
}

// flushCut says how much of the last item's standard error was left out.
func (s *stderrLog) flushCut() {
	if s.budget.Cut > 0 {
		s.log.Warn("item stderr cut", "item", s.last, "cut_bytes", s.budget.Cut, "kept_lines", s.budget.Lines)
		s.budget.Cut = 0
	}
}
