package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/internal/lines"
)

// ErrStopped is returned by Scale after the runtime has shut down.
var ErrStopped = errors.New("local runtime stopped")

// Config configures a Runtime.
type Config struct {
	// Binary is the pace executable used for exec-style workers; empty
	// means the running executable.
	Binary string `json:"binary,omitempty"`
	// NATSURL is given to every replica (--nats and PACE_NATS_URL).
	NATSURL string `json:"nats_url"`
	// Grace is how long a replica being scaled down may take to exit before
	// it is killed. Zero means 30s.
	Grace time.Duration `json:"grace,omitempty"`
	// MaxReplicas bounds the replicas of one job on this machine. Zero means 64.
	MaxReplicas int `json:"max_replicas,omitempty"`
	// Env is extra environment for every replica, e.g. PACE_LOG_LEVEL.
	Env []string `json:"env,omitempty"`
	// Output, when set, receives each line a replica writes on its standard
	// output or error (without the newline; at most 4 KiB of it), besides
	// Pace's own standard error, which gets them as written.
	Output func(job, replica, line string) `json:"-"`
	// JobEnv, when set, is extra environment for the replicas of one job
	// that take their items from the bus, e.g. their job's token
	// (PACE_TOKEN) on a bus that authenticates.
	JobEnv func(job string) []string `json:"-"`
	// RedisEnv, when set, is the environment of the replicas of one job
	// that take their items from the Redis front (Worker.Redis): where it
	// is and the job's queue, their only credential. They get no JobEnv.
	RedisEnv func(job string) []string `json:"-"`
	// Exited, when set, is told of each replica that exited on its own (or
	// could not start) and is about to be restarted, with the reason.
	Exited func(job, replica string, err error) `json:"-"`
	// Clock times the replicas' restarts and grace periods; nil is the
	// real clock.
	Clock clock.WithTicker `json:"-"`
	// Sandbox, when set, isolates each job's replicas from Pace and from
	// other jobs (sandbox.go); New fails when this machine cannot. Without
	// it replicas run as Pace's own user, which each job's log says.
	Sandbox *Sandbox `json:"-"`
}

func (c Config) withDefaults() Config {
	if c.Grace == 0 {
		c.Grace = 30 * time.Second
	}
	if c.MaxReplicas == 0 {
		c.MaxReplicas = 64
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// Worker describes how to run one replica of a job.
type Worker struct {
	Job string
	// Exec, when set, runs `pace worker Job --exec Exec`.
	Exec string
	// ExecMode, when set with Exec, adds `--exec-mode ExecMode`.
	ExecMode string
	// Command is the job's own worker program, used when Exec is empty.
	Command []string
	// Env is extra environment for the replica.
	Env map[string]string
	// Metered jobs have their use measured (Measure): jobs with a cost.
	Metered bool
	// Redis workers take their items from the Redis front: they get
	// Config.RedisEnv instead of Config.JobEnv.
	Redis bool
	// Limits bound the job's sandboxed replicas together.
	Limits Limits
}

func (w Worker) validate() error {
	switch {
	case w.Job == "":
		return errors.New("worker: job is required")
	case w.Exec == "" && len(w.Command) == 0:
		return errors.New("worker: exec or command is required")
	}
	return nil
}

// Runtime supervises the worker processes of every job. It is safe for
// concurrent use. Run must be running for Scale to start processes.
type Runtime struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	jobs    map[string]*pool // guarded by mu
	stopped bool             // guarded by mu
	wg      sync.WaitGroup   // one per replica supervisor
}

// Option configures a Runtime.
type Option func(*Runtime)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(r *Runtime) { r.log = l } }

// New returns a Runtime.
func New(cfg Config, opts ...Option) (*Runtime, error) {
	cfg = cfg.withDefaults()
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("local runtime: find pace binary: %w", err)
		}
		cfg.Binary = exe
	}
	if cfg.Grace < 0 || cfg.MaxReplicas < 0 {
		return nil, errors.New("local runtime: grace and max replicas must not be negative")
	}
	if cfg.Sandbox != nil {
		if err := cfg.Sandbox.setup(cfg.Binary); err != nil {
			return nil, err
		}
	}
	r := &Runtime{cfg: cfg, log: slog.New(slog.DiscardHandler), jobs: map[string]*pool{}}
	for _, opt := range opts {
		opt(r)
	}
	r.log = r.log.With("actuator", "local")
	return r, nil
}

// Isolation reports how the runtime isolates replicas: "" without a
// sandbox (Config.Sandbox).
func (r *Runtime) Isolation() Isolation {
	if r.cfg.Sandbox == nil {
		return ""
	}
	return r.cfg.Sandbox.Isolation()
}

// pool is the replicas of one job, oldest first.
type pool struct {
	worker   Worker
	replicas []*replica
	next     int  // sequence number of the next replica
	told     bool // the job's log was told its replicas run unsandboxed
}

// Scale sets the number of replicas of w.Job and returns it. New replicas
// start at once; surplus ones (the newest) are stopped gracefully.
func (r *Runtime) Scale(ctx context.Context, w Worker, replicas int) (int, error) {
	if err := w.validate(); err != nil {
		return 0, err
	}
	if replicas < 0 || replicas > r.cfg.MaxReplicas {
		return 0, fmt.Errorf("replicas %d: must be in [0, %d]", replicas, r.cfg.MaxReplicas)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return 0, ErrStopped
	}
	p := r.jobs[w.Job]
	if p == nil {
		p = &pool{}
		r.jobs[w.Job] = p
	}
	p.worker = w
	for len(p.replicas) < replicas {
		rep := &replica{id: w.Job + "-" + strconv.Itoa(p.next), stop: make(chan struct{})}
		p.next++
		p.replicas = append(p.replicas, rep)
		r.wg.Go(func() { r.supervise(rep, w) })
	}
	for len(p.replicas) > replicas {
		last := p.replicas[len(p.replicas)-1]
		p.replicas = p.replicas[:len(p.replicas)-1]
		last.requestStop(r.cfg.Grace)
	}
	if len(p.replicas) == 0 {
		delete(r.jobs, w.Job)
	}
	r.log.Info("job scaled", "job", w.Job, "replicas", replicas)
	return replicas, nil
}

// Replicas returns the number of replicas job should have running.
func (r *Runtime) Replicas(job string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.jobs[job]; p != nil {
		return len(p.replicas)
	}
	return 0
}

// Running returns the number of replica processes of job alive right now.
func (r *Runtime) Running(job string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	if p := r.jobs[job]; p != nil {
		for _, rep := range p.replicas {
			if rep.alive() {
				n++
			}
		}
	}
	return n
}

// Terminate kills every replica of job now, without grace.
func (r *Runtime) Terminate(job string) {
	r.mu.Lock()
	p := r.jobs[job]
	delete(r.jobs, job)
	r.mu.Unlock()
	if p == nil {
		return
	}
	for _, rep := range p.replicas {
		rep.requestStop(0)
	}
	r.log.Info("job terminated", "job", job, "killed", len(p.replicas))
}

// Jobs returns the jobs that have replicas, sorted.
func (r *Runtime) Jobs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	jobs := make([]string, 0, len(r.jobs))
	for j := range r.jobs {
		jobs = append(jobs, j)
	}
	slices.Sort(jobs)
	return jobs
}

// Run waits until ctx ends, then stops every replica gracefully (killing
// those that outlive the grace period) and returns when all have exited.
func (r *Runtime) Run(ctx context.Context) error {
	<-ctx.Done()
	r.mu.Lock()
	r.stopped = true
	jobs := r.jobs
	r.jobs = map[string]*pool{}
	r.mu.Unlock()
	for _, p := range jobs {
		for _, rep := range p.replicas {
			rep.requestStop(r.cfg.Grace)
		}
	}
	r.wg.Wait()
	return nil
}

// command builds the process of one replica.
func (r *Runtime) command(w Worker, id string) *exec.Cmd {
	var cmd *exec.Cmd
	if w.Exec != "" {
		cmd = exec.Command(r.cfg.Binary, "worker", w.Job, "--exec", w.Exec, "--nats", r.cfg.NATSURL,
			"--id", id, "--grace", (r.cfg.Grace - r.cfg.Grace/10).String(), "--connect-timeout", "0") // done before the kill
		if w.ExecMode != "" {
			cmd.Args = append(cmd.Args, "--exec-mode", w.ExecMode)
		}
	} else {
		cmd = exec.Command(w.Command[0], w.Command[1:]...)
	}
	cmd.Env = append(inheritedEnv(), r.cfg.Env...)
	cmd.Env = append(cmd.Env, "PACE_NATS_URL="+r.cfg.NATSURL, "PACE_JOB="+w.Job, "PACE_WORKER_ID="+id)
	switch {
	case w.Redis && r.cfg.RedisEnv != nil:
		cmd.Env = append(cmd.Env, r.cfg.RedisEnv(w.Job)...)
	case !w.Redis && r.cfg.JobEnv != nil:
		cmd.Env = append(cmd.Env, r.cfg.JobEnv(w.Job)...)
	}
	for k, v := range w.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = procAttr()
	return cmd
}

// inherited are the variables of Pace's own environment a replica gets: what
// finds programs and files and sets the locale and time zone. Besides them a
// replica gets Config.Env, the PACE_* variables that name its job and bus,
// the bus credentials Pace itself connects with (PACE_NATS_*: a replica
// connects as Pace does, until workers get credentials of their own) and
// the job's env; nothing else of Pace's environment (API tokens, cloud
// keys, InfluxDB credentials) reaches a tenant's command.
var inherited = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// inheritedEnv is the part of Pace's environment a replica inherits.
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(inherited, k) || strings.HasPrefix(k, "PACE_NATS_") {
			env = append(env, kv)
		}
	}
	return env
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// multiCloser writes to w and closes c.
type multiCloser struct {
	w io.Writer
	c io.Closer
}

func (m multiCloser) Write(p []byte) (int, error) { return m.w.Write(p) }
func (m multiCloser) Close() error                { return m.c.Close() }

// replica is one supervised worker process, restarted when it exits on its own.
type replica struct {
	id   string
	stop chan struct{} // closed when the replica must end

	mu    sync.Mutex
	proc  *os.Process   // current process; guarded by mu
	grace time.Duration // grace given to the stop; guarded by mu
	once  sync.Once
}

func (rep *replica) requestStop(grace time.Duration) {
	rep.once.Do(func() {
		rep.mu.Lock()
		rep.grace = grace
		rep.mu.Unlock()
		close(rep.stop)
	})
}

func (rep *replica) alive() bool {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return rep.proc != nil
}

// supervise runs the replica's process until stopped, restarting it with
// backoff when it exits on its own.
func (r *Runtime) supervise(rep *replica, w Worker) {
	log := r.log.With("job", w.Job, "replica", rep.id)
	backoff := time.Second
	r.tellUnsandboxed(w.Job, rep.id)
	for {
		cmd := r.command(w, rep.id)
		var out io.WriteCloser = nopCloser{os.Stderr}
		if r.cfg.Output != nil {
			lw := &lines.Writer{Emit: func(line string) { r.cfg.Output(w.Job, rep.id, line) }}
			out = multiCloser{io.MultiWriter(os.Stderr, lw), lw}
		}
		cmd.Stdout, cmd.Stderr = out, out
		started := r.cfg.Clock.Now()
		if err := r.start(cmd, w); err != nil {
			log.Error("replica did not start", "err", err)
			r.exited(w.Job, rep.id, fmt.Errorf("did not start: %w", err))
		} else {
			rep.mu.Lock()
			rep.proc = cmd.Process
			rep.mu.Unlock()
			exited := make(chan error, 1)
			go func() { err := cmd.Wait(); _ = out.Close(); r.ended(w.Job); exited <- err }()
			select {
			case err := <-exited:
				rep.mu.Lock()
				rep.proc = nil
				rep.mu.Unlock()
				if r.cfg.Clock.Since(started) > 30*time.Second {
					backoff = time.Second
				}
				log.Warn("replica exited, restarting", "err", err, "in", backoff)
				if err == nil {
					err = errors.New("exit status 0")
				}
				r.exited(w.Job, rep.id, err)
			case <-rep.stop:
				rep.mu.Lock()
				grace := rep.grace
				rep.mu.Unlock()
				terminate(cmd.Process, exited, grace, r.cfg.Clock, log)
				rep.mu.Lock()
				rep.proc = nil
				rep.mu.Unlock()
				return
			}
		}
		t := r.cfg.Clock.NewTimer(backoff)
		select {
		case <-rep.stop:
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// start starts cmd, in its job's sandbox when the runtime has one. After
// a nil error, ended must be called once the process has been waited for.
func (r *Runtime) start(cmd *exec.Cmd, w Worker) error {
	if r.cfg.Sandbox == nil {
		return cmd.Start()
	}
	sb, err := r.cfg.Sandbox.prepare(cmd, r.cfg.Binary, w.Job, w.Limits)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		sb.closeFiles()
		r.ended(w.Job)
		return err
	}
	if err := sb.started(cmd.Process); err != nil { // killed: its Wait says so
		r.log.Error("replica not sandboxed, killed", "job", w.Job, "err", err)
	}
	return nil
}

// ended frees what a process of job held in its sandbox.
func (r *Runtime) ended(job string) {
	if r.cfg.Sandbox == nil {
		return
	}
	if err := r.cfg.Sandbox.release(job); err != nil {
		r.log.Warn("sandbox not removed", "job", job, "err", err)
	}
}

// tellUnsandboxed writes once in a job's log that its replicas run as
// Pace's own user, when the runtime has no sandbox.
func (r *Runtime) tellUnsandboxed(job, replica string) {
	if r.cfg.Sandbox != nil || r.cfg.Output == nil {
		return
	}
	r.mu.Lock()
	p := r.jobs[job]
	tell := p != nil && !p.told
	if tell {
		p.told = true
	}
	r.mu.Unlock()
	if tell {
		r.cfg.Output(job, replica, "pace: this job's workers run unsandboxed, as Pace's own user: they can read what Pace can (--local-exec-unsandboxed)")
	}
}

func (r *Runtime) exited(job, replica string, err error) {
	if r.cfg.Exited != nil {
		r.cfg.Exited(job, replica, err)
	}
}

// terminate sends SIGTERM to the replica (unless grace is 0), so that a
// worker finishes the items it runs, and SIGKILL to its whole process group
// (the item commands included) after grace, then waits for the exit.
func terminate(p *os.Process, exited <-chan error, grace time.Duration, clk clock.WithTicker, log *slog.Logger) {
	if grace > 0 {
		_ = p.Signal(syscall.SIGTERM)
		t := clk.NewTimer(grace)
		defer t.Stop()
		select {
		case err := <-exited:
			log.Info("replica stopped", "err", err)
			return
		case <-t.C():
			log.Warn("replica outlived its grace period, killing it", "grace", grace)
		}
	}
	_ = signalGroup(p, syscall.SIGKILL)
	log.Info("replica killed", "err", <-exited)
}
