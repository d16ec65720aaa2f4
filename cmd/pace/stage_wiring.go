package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/bus/rediswq"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/runner"
	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate"
	"github.com/pace-platform/pace/stages/gate/targets"
	"github.com/pace-platform/pace/stages/manager"
	"github.com/pace-platform/pace/stages/visualizer"
)

// stageFlags hold the flags of every stage; each command registers the
// groups its stages read (pace up all of them).
type stageFlags struct {
	prov    provisionFlags
	http    httpFlags
	fc      flowcontrolFlags
	manager managerFlags
	redis   redisFlags
	tokens  tokenFlags
	trace   tracingFlags
	uiURL   string
	// hosted are the instances of the stages that register themselves
	// (internal/host), by name, holding their own flags.
	hosted map[string]host.Stage
	// targets are the instances of the actuation targets, by name.
	targets map[string]targets.Command
}

// stage returns this command's instance of a registered stage.
func (f *stageFlags) stage(d host.Def) host.Stage { return instance(&f.hosted, d.Name, d.New) }

// instance returns the value of name in *m, made by newValue on first use.
func instance[T any](m *map[string]T, name string, newValue func() T) T {
	if *m == nil {
		*m = map[string]T{}
	}
	v, ok := (*m)[name]
	if !ok {
		v = newValue()
		(*m)[name] = v
	}
	return v
}

// secretFiles are the files of the flags that hold secrets (tokens, keys,
// kubeconfig), which sandboxed local workers must not reach.
func (f *stageFlags) secretFiles() []string {
	var files []string
	for _, p := range []string{f.fc.tokenFile, f.tokens.jobTokenKey, f.tokens.calloutKey, f.http.tlsKey} {
		if p != "" {
			files = append(files, p)
		}
	}
	for _, d := range targets.Defs() {
		files = append(files, f.target(d).Secrets()...)
	}
	return files
}

// wiring assembles stages into one process: pace up wires all of them, pace
// stage one. It holds what the stages of a process share.
type wiring struct {
	a        *app
	f        *stageFlags
	c        *bus.Client
	log      *slog.Logger // the process's logger, with its replica identity in pace stage
	reg      *prometheus.Registry
	api      *http.ServeMux // health, metrics and the job API; behind APF when the API is served
	root     *http.ServeMux // the UI, outside APF, and api at "/"
	addr     string         // the HTTP listen address
	url      string         // the HTTP base URL
	identity string         // the replica's identity in pace stage; empty in pace up
	// startBudget bounds how long start-up rides out a recovering bus
	// (--connect-timeout in pace stage; zero: until the process stops).
	startBudget time.Duration
	natsURL     string   // the NATS URL local workers connect to
	workerEnv   []string // extra environment of local workers
	hide        []string // paths sandboxed local workers must not reach, besides the flags' secret files
	// jobEnv is the extra environment of one job's local workers: their
	// NATS token when the bus authenticates (nil: none).
	jobEnv func(job string) []string
	// redisEnv is the environment of one job's local Redis workers: where
	// the Redis front is and their queue (nil: no front).
	redisEnv func(job string) []string
	// jobToken mints a job's worker token when workers get job tokens;
	// nil otherwise.
	jobToken func(job string) string
	// jobClient connects as a job's worker with its token, for the Redis
	// front, when workers get job tokens; nil otherwise.
	jobClient rediswq.Opener
	// redisLn is the Redis front's listener (--redis-listen), opened by
	// listenRedis; nil when there is none.
	redisLn net.Listener

	fc      *apf.Gate        // one per process: pace up's job API and bus gate share its seats
	apiGate bool             // the job API is served: api goes behind fc
	resolve apfhttp.Resolver // classifies the job API's requests by their routes
	authn   auth.Authenticator
	mgr     *manager.Stage // the manager of the job API, if wired

	loops []func(context.Context) error // run on every replica
	terms []*runner.Term                // run by each stage's leader

	// stageClient, when set, connects a stage as its own NATS user (pace
	// up with authentication); otherwise every stage uses c.
	stageClient func(ctx context.Context, stage string) (*bus.Client, error)
	clients     []*bus.Client // the stages' own connections, closed by close
}

// Client returns the connection stage talks to the bus with (host.Process).
func (w *wiring) Client(ctx context.Context, stage string) (*bus.Client, error) {
	if w.stageClient == nil {
		return w.c, nil
	}
	c, err := w.stageClient(ctx, stage)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", stage, err)
	}
	w.clients = append(w.clients, c)
	return c, nil
}

// Logger is the process's logger (host.Process).
func (w *wiring) Logger() *slog.Logger { return w.log }

// Register adds collectors to /metrics (host.Process).
func (w *wiring) Register(cs ...prometheus.Collector) { w.reg.MustRegister(cs...) }

// Go runs loop on every replica (host.Process).
func (w *wiring) Go(loop runner.Loop) { w.loops = append(w.loops, loop) }

// close drains the stages' own connections.
func (w *wiring) close() {
	for _, c := range w.clients {
		closeClient(c)
	}
}

func newWiring(a *app, f *stageFlags, c *bus.Client, log *slog.Logger, ln net.Listener, natsURL string, workerEnv []string) *wiring {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Jobs().MalformedEvents())
	return &wiring{a: a, f: f, c: c, log: log, reg: reg, api: opsHandler(c, reg, f.fc.authenticates()), root: http.NewServeMux(),
		addr: ln.Addr().String(), url: f.http.url(ln), natsURL: natsURL, workerEnv: workerEnv}
}

// flowControl returns the process's APF gate, building it with its live
// configuration (the pace_flowcontrol bucket, maintained every minute) on
// first use.
func (w *wiring) flowControl(ctx context.Context) (*apf.Gate, error) {
	if w.fc != nil {
		return w.fc, nil
	}
	g, err := w.f.fc.gate(w.reg)
	if err != nil {
		return nil, err
	}
	file, err := w.f.fc.file()
	if err != nil {
		return nil, err
	}
	// Like provisioning, opening the bucket waits for a recovering cluster.
	var store *gate.ConfigStore
	err = bus.RetryTemporary(ctx, w.log, w.startBudget, "open the flowcontrol configuration", func(ctx context.Context) (err error) {
		store, err = gate.OpenConfig(ctx, w.c, w.log)
		return err
	})
	if err != nil {
		return nil, err
	}
	w.loops = append(w.loops, g.Run, func(ctx context.Context) error { return store.Run(ctx, g, file) })
	w.fc = g
	return g, nil
}

// authenticator builds the authentication chain once (nil: everyone is
// anonymous).
func (w *wiring) authenticator() (auth.Authenticator, error) {
	if w.authn == nil && w.f.fc.authenticates() {
		a, err := w.f.fc.authenticator()
		if err != nil {
			return nil, err
		}
		w.authn = a
	}
	return w.authn, nil
}

// Lead adds a stage's leader-only work (host.Process). build makes a fresh
// instance for each leadership term, so no in-memory state outlives its
// term, and returns its run func and metrics (nil: none). It is called once
// here, so that bad settings fail at start and not at the first takeover.
func (w *wiring) Lead(stage string, build runner.Build) error {
	t, err := runner.NewTerm(stage, build)
	if err != nil {
		return err
	}
	w.reg.MustRegister(t.Metrics())
	w.terms = append(w.terms, t)
	return nil
}

// handler is the HTTP handler of everything wired: callers authenticated
// first (a bad token is refused before anything is read), then the API's
// bodies read whole, within --body-timeout and --max-body, and only then
// the API admitted by APF, so that no seat waits on a slow client. The UI
// is outside APF; its streams bound themselves.
func (w *wiring) handler() http.Handler {
	var h http.Handler = w.api
	if w.apiGate {
		h = apfhttp.Middleware(w.fc, w.resolve)(h)
	}
	maxBody := int64(w.f.manager.maxBody)
	if maxBody <= 0 { // a stage without the job API's flags
		maxBody = 8 << 20
	}
	h = apfhttp.ReadBody(w.f.http.bodyLimits(maxBody, w.authn != nil))(h)
	w.root.Handle("/", h)
	return tracing.HTTP(auth.Middleware(w.authn)(w.root))
}

// run runs the wired stages and serves HTTP on ln until ctx ends or one of
// them fails. elect, when set, wraps each stage's leader work in leader
// election; without it (pace up) the work runs at once.
func (w *wiring) run(ctx context.Context, ln net.Listener, elect func(*runner.Term) runner.Loop) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, loop := range w.loops {
		g.Go(func() error { return runner.Rerun(gctx, w.log, bus.Temporary, loop) })
	}
	for _, t := range w.terms {
		run := func(ctx context.Context) error { return runner.Rerun(ctx, w.log, bus.Temporary, t.Run) }
		if elect != nil {
			run = elect(t) // a term failing for a while stands by again
		}
		g.Go(func() error { return run(gctx) })
	}
	g.Go(func() error { return w.f.http.serve(gctx, ln, w.handler(), w.log) })
	return g.Wait()
}

// The stages, in pipeline order. Each wire func adds a stage to w: loops
// every replica runs, and leader work through w.lead.

// wireManager serves the job API behind APF on every replica and runs the
// dead-letter mover, a shared durable consumer, on every replica too. The
// lifecycle loop (recovery, the NATS API, job checks) runs on the leader.
func wireManager(ctx context.Context, w *wiring) error {
	fc, err := w.flowControl(ctx)
	if err != nil {
		return err
	}
	authn, err := w.authenticator()
	if err != nil {
		return err
	}
	localMax := 0 // pace up runs the local actuator beside the manager
	if local, ok := w.f.enabled()[schemas.LocalActuator].(interface{ MaxReplicas() int }); ok {
		localMax = local.MaxReplicas()
	}
	c, err := w.Client(ctx, "manager")
	if err != nil {
		return err
	}
	mgr, api, err := w.f.manager.build(c, authn, w.addr, w.f.uiURL, w.redisAddr(), localMax, w.log)
	if err != nil {
		return err
	}
	api.Register(w.api)
	w.api.Handle(apfhttp.DebugPrefix, only(authn != nil, dumpReaders...)(apfhttp.DebugHandler(fc)))
	w.apiGate, w.resolve, w.mgr = true, api.Resolver(), mgr
	w.loops = append(w.loops, c.Letters().Move, manager.CountJobs(c, fc.ObjectCounts(), w.log))
	if w.f.tokens.calloutKey != "" {
		if err := w.serveCallout(c, authn); err != nil {
			return err
		}
	}
	if serve := w.serveFlowControl("manager", fc); serve != nil {
		w.loops = append(w.loops, serve)
	}
	return w.Lead("manager", func() (func(context.Context) error, prometheus.Collector, error) {
		return mgr.Run, mgr.Metrics(), nil
	})
}

// serveCallout runs the authorization service of the servers' auth callout
// on every replica (pace stage manager --nats-callout-key).
func (w *wiring) serveCallout(c *bus.Client, authn auth.Authenticator) error {
	issuer, err := w.f.tokens.issuer()
	if err != nil {
		return err
	}
	jobs, err := w.f.tokens.jobTokens()
	if err != nil {
		return err
	}
	users, ok := authn.(natsauth.Users)
	if !ok {
		return usageError("--nats-callout-key needs --token-file")
	}
	w.loops = append(w.loops, natsauth.New(c, issuer, users, jobs, w.log).Run)
	return nil
}

// wireGate admits infrastructure requests through APF and executes them on
// the targets the flags enable (local processes, Kubernetes), opened anew
// for each term of the leader: the local workers are its children.
func wireGate(ctx context.Context, w *wiring) error {
	fc, err := w.flowControl(ctx)
	if err != nil {
		return err
	}
	c, err := w.Client(ctx, "gate")
	if err != nil {
		return err
	}
	if jobs, err := w.f.tokens.jobTokens(); err != nil {
		return err
	} else if jobs != nil { // pace stage gate --job-token-key
		w.jobEnv = func(job string) []string { return []string{"PACE_TOKEN=" + jobs.Mint(job)} }
		w.jobToken = jobs.Mint
	}
	if err := w.listenRedis(); err != nil {
		return err
	}
	if w.redisLn != nil {
		w.wireRedis(c)
	}
	workers := targets.Workers{NATSURL: w.natsURL, Env: w.workerEnv, JobEnv: w.jobEnv, RedisEnv: w.redisEnv,
		JobToken: w.jobToken, RedisAddr: w.f.redis.podAddr, Hide: append(w.f.secretFiles(), w.hide...)}
	openers := map[string]targets.Opener{}
	for name, t := range w.f.enabled() {
		open, err := t.Opener(workers, w.log)
		if err != nil {
			return usageError("%v", err)
		}
		openers[name] = open
	}
	return w.Lead("gate", func() (func(context.Context) error, prometheus.Collector, error) {
		exec, runTargets, err := targets.Open(c, openers, targets.WithLogger(w.log))
		if err != nil {
			return nil, nil, err
		}
		gs, err := gate.New(gate.Deps{Bus: c, Gate: fc, Actuator: exec}, gate.Config{}, gate.WithLogger(w.log))
		if err != nil {
			return nil, nil, err
		}
		loops := []func(context.Context) error{runTargets, gs.Run}
		if serve := w.serveFlowControl("gate", fc); serve != nil {
			loops = append(loops, serve)
		}
		return runner.Group(loops...), gs.Metrics(), nil
	})
}

// serveFlowControl returns the loop answering the visualizer's requests for
// fc's state as stage (visualizer.ServeFlowControl): the manager's on every
// replica, the gate's on its leader. Nil in pace up, whose visualizer reads
// fc in process.
func (w *wiring) serveFlowControl(stage string, fc *apf.Gate) func(context.Context) error {
	if w.identity == "" {
		return nil
	}
	return func(ctx context.Context) error {
		return visualizer.ServeFlowControl(ctx, w.c, stage, w.identity, fc, w.log.With("stage", stage))
	}
}

// wireVisualizer serves the web UI under /ui/ on every replica, outside APF
// (its commands go through the API). Its job list is read with the job
// API's manager, or a manager of its own when the API runs elsewhere. Its
// flow-control page reads this process's APF (pace up) or asks the gate and
// manager processes over NATS (pace stage).
func wireVisualizer(ctx context.Context, w *wiring) error {
	authn, err := w.authenticator()
	if err != nil {
		return err
	}
	c, err := w.Client(ctx, "visualizer")
	if err != nil {
		return err
	}
	jobs := w.mgr
	if jobs == nil {
		if jobs, _, err = w.f.manager.build(c, authn, w.addr, "", "", 0, w.log); err != nil {
			return err
		}
	}
	ui, err := visualizer.New(visualizer.Deps{Jobs: jobs, Bus: c}, visualizer.Config{Open: authn == nil, TraceURL: w.f.trace.viewer},
		visualizer.WithLogger(w.log))
	if err != nil {
		return err
	}
	if w.fc != nil {
		ui.SetFlowControl(w.fc)
	} else {
		ui.SetRemoteFlowControl(c)
	}
	ui.Register(w.root)
	w.reg.MustRegister(ui.Metrics())
	w.loops = append(w.loops, ui.Run) // one reader of the job events wakes every stream
	return nil
}
