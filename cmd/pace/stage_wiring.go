package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/runner"
	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/stages/gate"
)

// stageFlags hold the flags of the process and of its stages; each command
// registers the groups its stages use (pace up all of them).
type stageFlags struct {
	prov   provisionFlags
	http   httpFlags
	fc     flowcontrolFlags
	tokens tokenFlags
	trace  tracingFlags
	// hosted are this command's instances of the registered stages, by
	// name, holding their own flags.
	hosted map[string]host.Stage
}

// stage returns this command's instance of a registered stage.
func (f *stageFlags) stage(d host.Def) host.Stage {
	if f.hosted == nil {
		f.hosted = map[string]host.Stage{}
	}
	s, ok := f.hosted[d.Name]
	if !ok {
		s = d.New()
		f.hosted[d.Name] = s
	}
	return s
}

// addUses registers the flags of the process's services that uses names.
func (f *stageFlags) addUses(fs *pflag.FlagSet, uses host.Uses) {
	if uses&host.UsesFlowControl != 0 {
		f.fc.addSeats(fs)
	}
	if uses&host.UsesAuthentication != 0 {
		f.fc.addTokens(fs)
	}
	switch {
	case uses&host.UsesCallout != 0:
		f.tokens.addCallout(fs) // and --job-token-key, which it checks
	case uses&host.UsesJobTokens != 0:
		f.tokens.addJobTokens(fs)
	}
}

// secretFiles are the files of the process's flags that hold secrets
// (tokens, keys), which sandboxed local workers must not reach; the
// targets add their own.
func (f *stageFlags) secretFiles() []string {
	var files []string
	for _, p := range []string{f.fc.tokenFile, f.tokens.jobTokenKey, f.tokens.calloutKey, f.http.tlsKey} {
		if p != "" {
			files = append(files, p)
		}
	}
	return files
}

// wiring assembles stages into one process: pace up wires all of them, pace
// stage one. It holds what the stages of a process share.
type wiring struct {
	a      *app
	f      *stageFlags
	c      *bus.Client
	log    *slog.Logger // the process's logger, with its replica identity in pace stage
	reg    *prometheus.Registry
	shared host.Shared
	// startBudget bounds how long start-up rides out a recovering bus
	// (--connect-timeout in pace stage; zero: until the process stops).
	startBudget time.Duration

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

// provide lets the stages that provide something to the others check their
// flags against sh and set it up, before anything starts; sh's workers are
// told the process's secret files.
func (f *stageFlags) provide(defs []host.Def, sh *host.Shared) error {
	sh.Workers.Hide = append(sh.Workers.Hide, f.secretFiles()...)
	for _, d := range defs {
		if p, ok := f.stage(d).(host.Provider); ok {
			if err := p.Provide(sh); err != nil {
				return usageError("%v", err)
			}
		}
	}
	return nil
}

// newWiring makes the process serving HTTP on ln, sharing sh (from
// provide) among its stages.
func newWiring(a *app, f *stageFlags, c *bus.Client, log *slog.Logger, ln net.Listener, sh host.Shared) *wiring {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Jobs().MalformedEvents())
	sh.URL, sh.TraceURL = f.http.url(ln), f.trace.viewer
	sh.API, sh.UI = opsHandler(c, reg, f.fc.authenticates()), http.NewServeMux()
	return &wiring{a: a, f: f, c: c, log: log, reg: reg, shared: sh}
}

// Shared is what the process's stages share (host.Process).
func (w *wiring) Shared() *host.Shared { return &w.shared }

// prepare builds the services the stages of defs use, once for the
// process, before any of them wires.
func (w *wiring) prepare(ctx context.Context, defs []host.Def) error {
	var uses host.Uses
	for _, d := range defs {
		uses |= d.Uses
	}
	if uses&(host.UsesAuthentication|host.UsesCallout) != 0 && w.f.fc.authenticates() {
		a, err := w.f.fc.authenticator()
		if err != nil {
			return err
		}
		w.shared.Authenticator = a
	}
	if uses&host.UsesFlowControl != 0 {
		if err := w.flowControl(ctx); err != nil {
			return err
		}
	}
	if uses&(host.UsesJobTokens|host.UsesCallout) != 0 {
		jobs, err := w.f.tokens.jobTokens()
		if err != nil {
			return err
		}
		if jobs != nil && w.shared.Workers.JobToken == nil { // pace stage --job-token-key
			w.shared.Workers.JobToken = jobs.Mint
		}
		if uses&host.UsesCallout != 0 && w.f.tokens.calloutKey != "" {
			if err := w.serveCallout(jobs); err != nil {
				return err
			}
		}
	}
	return nil
}

// flowControl builds the process's APF gate with its live configuration
// (the pace_flowcontrol bucket, maintained every minute).
func (w *wiring) flowControl(ctx context.Context) error {
	g, err := w.f.fc.gate(w.reg)
	if err != nil {
		return err
	}
	file, err := w.f.fc.file()
	if err != nil {
		return err
	}
	// Like provisioning, opening the bucket waits for a recovering cluster.
	var store *gate.ConfigStore
	err = bus.RetryTemporary(ctx, w.log, w.startBudget, "open the flowcontrol configuration", func(ctx context.Context) (err error) {
		store, err = gate.OpenConfig(ctx, w.c, w.log)
		return err
	})
	if err != nil {
		return err
	}
	w.loops = append(w.loops, g.Run, func(ctx context.Context) error { return store.Run(ctx, g, file) })
	w.shared.FlowControl = g
	return nil
}

// serveCallout runs the authorization service of the servers' auth callout
// on every replica (pace stage manager --nats-callout-key).
func (w *wiring) serveCallout(jobs *natsauth.JobTokens) error {
	issuer, err := w.f.tokens.issuer()
	if err != nil {
		return err
	}
	users, ok := w.shared.Authenticator.(natsauth.Users)
	if !ok {
		return usageError("--nats-callout-key needs --token-file")
	}
	w.loops = append(w.loops, natsauth.New(w.c, issuer, users, jobs, w.log).Run)
	return nil
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
// bodies read whole, within --body-timeout and its stage's largest body,
// and only then the API admitted by APF, with the APF dumps, so that no
// seat waits on a slow client. The UI is outside APF; its streams bound
// themselves.
func (w *wiring) handler() http.Handler {
	authn := w.shared.Authenticator
	var h http.Handler = w.shared.API
	resolve, maxBody := w.shared.Admission()
	if resolve != nil {
		w.shared.API.Handle(apfhttp.DebugPrefix, only(authn != nil, dumpReaders...)(apfhttp.DebugHandler(w.shared.FlowControl)))
		h = apfhttp.Middleware(w.shared.FlowControl, resolve)(h)
	}
	if maxBody <= 0 { // no job API
		maxBody = 8 << 20
	}
	h = apfhttp.ReadBody(w.f.http.bodyLimits(maxBody, authn != nil))(h)
	w.shared.UI.Handle("/", h)
	return tracing.HTTP(auth.Middleware(authn)(w.shared.UI))
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
