package execpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// ErrClosed is returned by Handle after Close.
var ErrClosed = errors.New("exec pool closed")

// Config configures a Pool.
type Config struct {
	// Command is run with sh -c, once per process.
	Command string `json:"command"`
	// Mode is Lines or JSON.
	Mode Mode `json:"mode"`
	// Processes bounds the processes running at once: one per item handled
	// at once (the worker's concurrency). Zero means 1.
	Processes int `json:"processes,omitempty"`
	// KillDelay is how long a process being stopped gets between SIGTERM
	// and SIGKILL. Zero means 5s.
	KillDelay time.Duration `json:"kill_delay,omitempty"`
	// StallWarning is how long a process may work on an item before a
	// warning that it may buffer its output is logged (once per process).
	// Zero means 10s; negative means never.
	StallWarning time.Duration `json:"stall_warning,omitempty"`
	// Env is the processes' environment; nil means this process's own.
	Env []string `json:"-"`
}

// defaultKillDelay is the time between SIGTERM and SIGKILL of a process
// being stopped when the job sets no worker.termination_grace.
const defaultKillDelay = 5 * time.Second

func (c Config) withDefaults() Config {
	if c.Processes == 0 {
		c.Processes = 1
	}
	if c.KillDelay == 0 {
		c.KillDelay = defaultKillDelay
	}
	if c.StallWarning == 0 {
		c.StallWarning = 10 * time.Second
	}
	return c
}

func (c Config) validate() error {
	switch {
	case strings.TrimSpace(c.Command) == "":
		return errors.New("exec pool: command is required")
	case c.Mode != Lines && c.Mode != JSON:
		return fmt.Errorf("exec pool: mode %q: want %s or %s", c.Mode, Lines, JSON)
	case c.Processes < 0 || c.KillDelay < 0:
		return errors.New("exec pool: processes and kill delay must not be negative")
	}
	return nil
}

// Pool runs items through up to Config.Processes long-lived processes.
// Its Handle method is a bus.Handler. It is safe for concurrent use.
type Pool struct {
	cfg   Config
	log   *slog.Logger
	slots chan struct{}  // one per item being handled: at most cfg.Processes
	wg    sync.WaitGroup // every goroutine of every process

	mu     sync.Mutex
	idle   []*process            // guarded by mu: running processes holding no item, last used last
	live   map[*process]struct{} // guarded by mu: processes started and not stopped
	closed bool                  // guarded by mu
}

// New returns a pool; it starts processes as items need them.
func New(cfg Config, log *slog.Logger) (*Pool, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Pool{cfg: cfg, log: log.With("exec_mode", string(cfg.Mode)), slots: make(chan struct{}, cfg.Processes),
		live: map[*process]struct{}{}}, nil
}

// SetKillDelay replaces Config.KillDelay for processes started or stopped
// from now on (a job's termination grace, known once the worker has opened
// its job). Config.KillDelay is read with mu held.
func (p *Pool) SetKillDelay(d time.Duration) {
	if d > 0 {
		p.mu.Lock()
		p.cfg.KillDelay = d
		p.mu.Unlock()
	}
}

// Handle sends item to an idle process, started if none is, and returns its
// answer. It waits for a free process while Config.Processes items are
// being handled. An error wrapping ErrProcessFailed means the process failed
// and was stopped (see the package documentation); ErrNewline, that the item
// cannot be sent in Lines mode; ErrClosed, that Close was called; any other,
// that the process answered with an error (JSON mode) or without a result.
func (p *Pool) Handle(ctx context.Context, item *schemas.WorkItem) (string, error) {
	req, err := p.cfg.Mode.encode(item)
	if err != nil {
		return "", err
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	defer func() { <-p.slots }()
	pr, err := p.take(item.ID)
	if err != nil {
		return "", err
	}
	ans, err := p.call(ctx, pr, item.ID, req)
	if errors.As(err, new(unread)) {
		// It exited while idle, after take found it healthy: a new one
		// takes the item, once.
		p.discard(pr)
		if pr, err = p.take(item.ID); err != nil {
			return "", err
		}
		ans, err = p.call(ctx, pr, item.ID, req)
	}
	if err != nil {
		p.discard(pr)
		return "", err
	}
	pr.drainStderr()
	out, err := p.cfg.Mode.decode(item, ans)
	if errors.Is(err, ErrProcessFailed) {
		p.log.Warn("process broke the protocol: stopping it", "pid", pr.cmd.Process.Pid, "err", err)
		p.discard(pr)
		return "", err
	}
	p.release(pr)
	return out, err
}

// take returns an idle healthy process, or starts one, to hold item: what
// the process writes on its standard error from then until its next item
// is logged as this item's (a new process's start-up included). It starts it with
// mu held, so that Close, once it holds mu, finds every process in live.
func (p *Pool) take(item string) (*process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.idle) > 0 {
		pr := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if pr.healthy(p.log, p.cfg.Mode) {
			pr.item.Store(&item)
			return pr, nil
		}
		p.stopLocked(pr)
	}
	if p.closed {
		return nil, ErrClosed
	}
	pr, err := p.start(item)
	if err != nil {
		return nil, err
	}
	p.live[pr] = struct{}{}
	p.log.Debug("process started", "pid", pr.cmd.Process.Pid, "processes", len(p.live))
	return pr, nil
}

// release makes pr idle again, unless it was stopped meanwhile.
func (p *Pool) release(pr *process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.live[pr]; ok {
		p.idle = append(p.idle, pr)
	}
}

// discard stops pr; the next item that needs a process starts another.
func (p *Pool) discard(pr *process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked(pr)
}

// stopLocked stops pr and forgets it. A process is in live from its start
// to its stop, so after Close no stop is left to add to wg.
func (p *Pool) stopLocked(pr *process) {
	if _, ok := p.live[pr]; ok {
		delete(p.live, pr)
		pr.stop(&p.wg, p.cfg.KillDelay)
	}
}

// Close stops every process, failing the items they hold, and returns once
// all have exited: at most about twice KillDelay. Handle then returns
// ErrClosed.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	for pr := range p.live {
		p.stopLocked(pr)
	}
	p.idle = nil
	p.mu.Unlock()
	p.wg.Wait()
}
