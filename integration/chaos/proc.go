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

// Group owns the processes of a test: it starts them with their output in
// log files under its directory, and when the test ends it kills them and,
// if the test failed, prints the end of every log.
type Group struct {
	t   testing.TB
	dir string

	mu    sync.Mutex // guards procs
	procs []*Proc
}

// NewGroup returns a group whose logs go to dir.
func NewGroup(t testing.TB, dir string) *Group {
	g := &Group{t: t, dir: dir}
	t.Cleanup(func() {
		g.mu.Lock()
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
// the same arguments; every run appends to the same log file.
type Proc struct {
	Name    string
	path    string
	args    []string
	env     []string
	logPath string

	mu     sync.Mutex // guards cmd, exited, starts and cpu
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	cpu    time.Duration // of the runs that have exited, their children included
}

// Add declares a process without starting it. env is added to the test's
// environment.
func (g *Group) Add(name, path string, args []string, env ...string) *Proc {
	p := &Proc{Name: name, path: path, args: args, env: env, logPath: filepath.Join(g.dir, name+".log")}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	return p
}

// Start starts p; it fails the test if p cannot be started or runs already.
func (g *Group) Start(p *Proc) {
	g.t.Helper()
	if err := p.Start(); err != nil {
		g.t.Fatal(err)
	}
}

// Start runs the process, its standard output and error appended to its log.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.exited:
		default:
			return fmt.Errorf("start %s: already running as pid %d", p.Name, p.cmd.Process.Pid)
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
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		p.cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		p.mu.Unlock()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

// Kill sends SIGKILL and waits until the process has exited. Killing a
// process that is not running does nothing.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return
	}
	<-exited
}

// Running reports whether the process has been started and not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Pid returns the process id of the current run, 0 when never started.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Starts returns how many times the process was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
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
		i = bytes.LastIndexByte(data[:i], '\n')
		if i < 0 {
			i = 0
		}
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
