package main

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/internal/host"
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

// wiring is one process of stages as a command sets it up: the
// host.Server they run in, and the services built from the process's
// flags.
type wiring struct {
	*host.Server
	f   *stageFlags
	c   *bus.Client
	log *slog.Logger // the process's logger, with its replica identity in pace stage
	// startBudget bounds how long start-up rides out a recovering bus
	// (--connect-timeout in pace stage; zero: until the process stops).
	startBudget time.Duration
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
// provide) among its stages; stageClient, when set, connects each stage as
// its own NATS user.
func newWiring(f *stageFlags, c *bus.Client, log *slog.Logger, ln net.Listener, sh host.Shared,
	stageClient func(context.Context, string) (*bus.Client, error)) *wiring {
	sh.URL, sh.TraceURL = f.http.url(ln), f.trace.viewer
	srv := host.NewServer(host.ServerConfig{Bus: c, Log: log, Shared: sh, TLS: f.http.tls,
		BodyTimeout: f.http.bodyTimeout, StageClient: stageClient})
	return &wiring{Server: srv, f: f, c: c, log: log}
}

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
		w.Shared().Authenticator = a
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
		if jobs != nil && w.Shared().Workers.JobToken == nil { // pace stage --job-token-key
			w.Shared().Workers.JobToken = jobs.Mint
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
	g, err := w.f.fc.gate(w.Registerer())
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
	w.Go(g.Run)
	w.Go(func(ctx context.Context) error { return store.Run(ctx, g, file) })
	w.Shared().FlowControl = g
	return nil
}

// serveCallout runs the authorization service of the servers' auth callout
// on every replica (pace stage manager --nats-callout-key).
func (w *wiring) serveCallout(jobs *natsauth.JobTokens) error {
	issuer, err := w.f.tokens.issuer()
	if err != nil {
		return err
	}
	users, ok := w.Shared().Authenticator.(natsauth.Users)
	if !ok {
		return usageError("--nats-callout-key needs --token-file")
	}
	w.Go(natsauth.New(w.c, issuer, users, jobs, w.log).Run)
	return nil
}
