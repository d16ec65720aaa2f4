package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrRunning is returned by Proc.Start when the process runs already (its
// supervisor may have restarted it).
var ErrRunning = errors.New("process is running")

// Group owns the processes of a test: it starts them with their output in
// log files under its directory, and when the test ends it kills them and,
// if the test failed, prints the end of every log.
type Group struct {
	t   testing.TB
	dir string

	mu     sync.Mutex // guards procs and closed
	procs  []*Proc
	closed bool // the test is over: no more restarts
}

// NewGroup returns a group whose logs go to dir.
func NewGroup(t testing.TB, dir string) *Group {
	g := &Group{t: t, dir: dir}
	t.Cleanup(func() {
		g.mu.Lock()
		g.closed = true
		procs := append([]*Proc(nil), g.procs...)
		g.mu.Unlock()
		for _, p := range procs {
			p.Kill()
		}
		if t.Failed() {
			for _, p := range procs {
				t.Logf("--- last lines of %s (%s)\n%s", p.Name, p.logPath, p.Tail(40))
			}
		}
	})
	return g
}

// Proc is a program the test starts, kills with SIGKILL and restarts with
// the same arguments; every run appends to the same log file. A supervised
// process that exits by itself is restarted, as Kubernetes restarts a
// container.
type Proc struct {
	Name    string
	g       *Group
	path    string
	args    []string
	env     []string
	logPath string

	mu        sync.Mutex // guards the fields below
	supervise bool
	doneCode  int // with supervise: an exit with this code (not 0) is the end of p's work
	cur       *run
	starts    int
	crashes   int
	cpu       time.Duration // of the runs that have exited, their children included
}

// run is one execution of a Proc.
type run struct {
	cmd    *exec.Cmd
	exited chan struct{}
	killed bool // by Kill: not a crash
}

// Add declares a process without starting it. env is added to the test's
// environment.
func (g *Group) Add(name, path string, args []string, env ...string) *Proc {
	p := &Proc{Name: name, g: g, path: path, args: args, env: env, logPath: filepath.Join(g.dir, name+".log")}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	return p
}

// Supervise restarts p whenever it exits without being killed by Kill,
// after a second; such exits are counted by Crashes and logged.
func (p *Proc) Supervise() *Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.supervise = true
	return p
}

// DoneOn makes an exit with code, which p uses to say its work is over
// (pace worker's 3: the job is finished), neither a crash nor a reason to
// restart it.
func (p *Proc) DoneOn(code int) *Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.doneCode = code
	return p
}

// Start starts p, failing the test if it cannot; a process that runs
// already is left alone.
func (g *Group) Start(p *Proc) {
	g.t.Helper()
	if err := p.Start(); err != nil && !errors.Is(err, ErrRunning) {
		g.t.Fatal(err)
	}
}

// Start runs the process, its standard output and error appended to its
// log. It returns ErrRunning if the process runs already.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		select {
		case <-p.cur.exited:
		default:
			return fmt.Errorf("start %s: %w as pid %d", p.Name, ErrRunning, p.cur.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	defer f.Close() //nolint:errcheck // the child has its own descriptor
	p.starts++
	fmt.Fprintf(f, "=== chaos: start %d of %s at %s\n", p.starts, p.Name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// The kernel kills the child if the test process dies, even by its
	// own timeout, so no process outlives the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	r := &run{cmd: cmd, exited: make(chan struct{})}
	p.cur = r
	go p.wait(r)
	return nil
}

// wait reaps run r and restarts a supervised process that crashed.
func (p *Proc) wait(r *run) {
	err := r.cmd.Wait()
	p.mu.Lock()
	p.cpu += r.cmd.ProcessState.UserTime() + r.cmd.ProcessState.SystemTime()
	done := p.doneCode != 0 && r.cmd.ProcessState.ExitCode() == p.doneCode
	crashed := p.supervise && !r.killed && !done
	if crashed {
		p.crashes++
	}
	p.mu.Unlock()
	close(r.exited)
	if !crashed {
		return
	}
	p.g.mu.Lock()
	defer p.g.mu.Unlock() // the test cannot end while it logs
	if p.g.closed {
		return
	}
	p.g.t.Logf("%s exited by itself (%v), restarting it; last lines:\n%s", p.Name, err, p.Tail(3))
	time.AfterFunc(time.Second, func() {
		p.g.mu.Lock()
		defer p.g.mu.Unlock()
		if p.g.closed {
			return
		}
		if err := p.Start(); err != nil && !errors.Is(err, ErrRunning) {
			p.g.t.Errorf("restart %s: %v", p.Name, err)
		}
	})
}

// Kill sends SIGKILL and waits until the process has exited. Killing a
// process that is not running does nothing.
func (p *Proc) Kill() {
	p.mu.Lock()
	r := p.cur
	if r != nil {
		r.killed = true
	}
	p.mu.Unlock()
	if r == nil {
		return
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return
	}
	<-r.exited
}

// Running reports whether the process has been started and not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return false
	}
	select {
	case <-p.cur.exited:
		return false
	default:
		return true
	}
}

// Pid returns the process id of the current run, 0 when never started.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return 0
	}
	return p.cur.cmd.Process.Pid
}

// Crashes returns how many times a supervised process exited by itself.
func (p *Proc) Crashes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.crashes
}

// CPU returns the processor time used by the runs that have exited, with
// their waited-for children (a worker's item commands).
func (p *Proc) CPU() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cpu
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	data = bytes.TrimRight(data, "\n")
	i := len(data)
	for ; n > 0 && i > 0; n-- {
		i = max(bytes.LastIndexByte(data[:i], '\n'), 0)
	}
	return string(bytes.TrimLeft(data[i:], "\n"))
}

// Children returns the process ids of pid's children (Linux: from
// /proc/PID/task/*/children), e.g. the workers a gate runs locally.
func Children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(data)) {
			if child, err := strconv.Atoi(field); err == nil {
				out = append(out, child)
			}
		}
	}
	return out
}
