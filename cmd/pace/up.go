package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/flagvalue"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/runner"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/visualizer"
)

type upOptions struct {
	data       string
	natsListen string
	maxMemory  flagvalue.Bytes
	maxStore   flagvalue.Bytes
	syncAlways bool
	prefix     string
	f          stageFlags
	demo       bool
	demoDir    string
	insecure   bool
	flags      *pflag.FlagSet // the command's, stages' included
}

func newUpCmd(a *app) *cobra.Command {
	o := &upOptions{maxMemory: 256 << 20, maxStore: 10 << 30}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start Pace on this machine",
		Long: `Up starts Pace in one process: an embedded NATS server with JetStream
(its store in --data), every stream Pace needs, and every stage that 'pace
stage' runs on its own (docs/stages.md): the manager with the dead-letter
mover, an HTTP server with /healthz, /livez, /readyz, /metrics, the job API
(/submissions, /plugins, /openapi.json; see docs/api.md) and the web UI
(/ui/), the monitor: collector, processor and sinks (every job's progress as
pace_job_* on /metrics, and in InfluxDB with --influx-url; see
docs/monitoring.md), and the control loop: controller, actuator and the APF
gate with the local worker runtime.

When ready it prints the NATS URL that workers and clients connect to and
the HTTP URL. Ctrl-C or SIGTERM stops it cleanly; data survives restarts.

With --token-file, the bus authenticates too: every NATS connection
presents a token of the file (pace push --token, PACE_TOKEN, nats --token)
and may reach only its user's jobs; the workers Pace starts get their job's
token. NATS listening beyond loopback needs --token-file, or --insecure
(docs/security.md).`,
		Example: `  pace up
  pace up --demo   # a job that needs several workers to meet its deadline, then its report
  pace up --data /var/lib/pace --http :8080 --nats-listen 0.0.0.0:4222
  pace up --nats-listen ""   # in-process NATS only, no TCP port
  pace up --http 0.0.0.0:8443 --tls-cert pace.crt --tls-key pace.key --token-file tokens.csv
  pace up --influx-url http://localhost:8086 --influx-bucket pace/autogen   # InfluxDB 1.8 db/rp
  PACE_INFLUX_TOKEN=… pace up --influx-url https://influx.example --influx-org acme --influx-bucket pace`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.demo {
				if err := o.prepareDemo(cmd, a); err != nil {
					return err
				}
				defer os.RemoveAll(o.demoDir) //nolint:errcheck // a temporary directory
			}
			return o.run(cmd.Context(), a)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.data, "data", "./pace-data", "directory for Pace's data (the JetStream store)")
	o.f.http.add(f, "127.0.0.1:8080", "HTTP listen address for the API, the UI, health and metrics")
	f.StringVar(&o.natsListen, "nats-listen", "127.0.0.1:4222", `NATS listen address for workers and clients ("" = in-process only)`)
	f.Var(&o.maxMemory, "max-memory", "JetStream memory limit, e.g. 256MiB")
	f.Var(&o.maxStore, "max-store", "JetStream disk limit, e.g. 10GiB")
	f.BoolVar(&o.syncAlways, "sync-always", false, "flush every write to disk before acknowledging it (slower, survives power loss)")
	f.StringVar(&o.prefix, "prefix", string(schemas.DefaultPrefix), "subject prefix of this installation")
	o.f.prov.add(f, "a fifth of --max-store")
	o.f.fc.add(f)
	o.f.trace.add(f)
	for _, d := range host.Defs() {
		o.f.stage(d).Flags(f)
	}
	o.flags = f
	f.BoolVar(&o.insecure, "insecure", false, "let --nats-listen reach other machines without --token-file: anyone reaching it may use the bus unauthenticated")
	f.BoolVar(&o.demo, "demo", false, "run a demo batch job that needs several workers to meet its deadline, print its report and exit (0: deadline met)")
	return cmd
}

func (o *upOptions) run(ctx context.Context, a *app) error {
	if !schemas.Prefix(o.prefix).Valid() {
		return usageError("--prefix %q: must be letters, digits, '-' or '_'", o.prefix)
	}
	if err := o.f.http.validate(); err != nil {
		return err
	}
	if err := o.f.fc.clientCerts(&o.f.http); err != nil {
		return err
	}
	if o.natsListen != "" {
		_, port, err := net.SplitHostPort(o.natsListen)
		if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil {
			return usageError("--nats-listen %q: want host:port with a port from 0 (any free port) to 65535, or \"\" for in-process only", o.natsListen)
		}
	}
	if err := o.f.prov.validate(); err != nil {
		return err
	}
	if err := o.f.trace.validate(); err != nil {
		return err
	}
	for _, d := range host.Defs() {
		if err := o.f.stage(d).Validate(); err != nil {
			return usageError("%v", err)
		}
	}
	secured, err := o.secured()
	if err != nil {
		return err
	}
	stages := o.stages(a.log)
	// Local workers reach the bus at the server's URL, known once it runs;
	// the stages check their flags against whether it listens.
	sh := host.Shared{Workers: host.Workers{NATSURL: o.natsListen, Env: append(workerEnv(a, o.prefix), o.f.trace.workerEnv()...)}}
	if err := o.f.provide(stages, &sh); err != nil {
		return err
	}
	data, err := filepath.Abs(o.data)
	if err != nil {
		return usageError("--data %q: %v", o.data, err)
	}
	log := a.log.With("stage", "up")
	stopTraces, err := o.f.trace.start(ctx, a, "pace")
	if err != nil {
		return err
	}
	defer stopTraces() // after every stage has stopped
	// Only Pace's user reads its store and keys.
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	var ba *busAuth
	cfg := bus.ServerConfig{DataDir: data, Listen: o.natsListen,
		MaxMemory: int64(o.maxMemory), MaxStore: int64(o.maxStore), SyncAlways: o.syncAlways}
	copts := []bus.Option{bus.WithName("pace-up"), bus.WithLogger(a.log), bus.WithPrefix(schemas.Prefix(o.prefix))}
	if secured {
		if ba, err = o.newBusAuth(); err != nil {
			return err
		}
		cfg.Auth = ba.server
		copts = append(copts, ba.as("admin"))
	}

	if err := portFree(o.natsListen); err != nil {
		return err
	}
	srv, err := bus.StartServer(cfg, log)
	if err != nil {
		return err
	}
	defer srv.Shutdown() // last: after every client has drained
	c, err := bus.Connect(ctx, "", append(copts, bus.WithServer(srv))...)
	if err != nil {
		return err
	}
	defer closeClient(c)
	if err := c.Provision(ctx, o.f.prov.limits(int64(o.maxStore), secured)); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.f.http.addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", o.f.http.addr, err)
	}
	defer ln.Close() //nolint:errcheck // closed by the server already when it ran
	sh.Workers.NATSURL, sh.Workers.Hide = srv.ClientURL(), append(sh.Workers.Hide, data)
	var stageClient func(context.Context, string) (*bus.Client, error)
	var callout runner.Loop
	if ba != nil {
		if stageClient, callout, err = ba.wire(&sh, srv, c, data, o, a.log); err != nil {
			return err
		}
	}
	w := newWiring(&o.f, c, a.log, ln, sh, stageClient)
	defer w.Close()
	w.Shared().UIURL = w.Shared().URL + "/ui"
	if callout != nil {
		w.Go(callout)
	}
	if err := w.prepare(ctx, stages); err != nil {
		return err
	}
	for _, d := range stages {
		if err := o.f.stage(d).Wire(ctx, w); err != nil {
			return err
		}
	}

	if url := srv.ClientURL(); url != "" {
		fmt.Fprintf(a.stdout, "NATS: %s\n", url)
	} else {
		fmt.Fprintln(a.stdout, "NATS: in-process only (no TCP listener)")
	}
	fmt.Fprintf(a.stdout, "HTTP: %s\n", w.Shared().URL)
	if w.Shared().RedisAddr != "" {
		fmt.Fprintf(a.stdout, "Redis: %s\n", w.Shared().RedisAddr)
	}
	fmt.Fprintf(a.stdout, "UI: %s%s\n", w.Shared().URL, visualizer.Prefix)
	log.Info("pace is up", "data", data, "http", w.Shared().URL, "nats", srv.ClientURL(), "nats_auth", secured)
	if o.demo {
		w.Go(func(ctx context.Context) error { return runDemo(ctx, a, w.Shared().URL) })
	}

	err = w.Run(ctx, ln, nil)
	log.Info("pace is shutting down")
	if errors.Is(err, errDemoDone) {
		return nil
	}
	return err
}

// stages are the registered stages pace up runs: every one but those
// whose flags leave them idle (the gate without a target) and the stages
// that feed those (the actuator: decisions are then published, workers
// not run).
func (o *upOptions) stages(log *slog.Logger) []host.Def {
	idle := map[string]bool{}
	for _, d := range host.Defs() {
		if i, ok := o.f.stage(d).(host.Idler); ok {
			if err := i.Idle(); err != nil {
				idle[d.Name] = true
				log.Info("stage not run", "stage", d.Name, "why", err.Error())
			}
		}
	}
	var run []host.Def
	for _, d := range host.Defs() {
		if idle[d.Name] || idle[d.Feeds] {
			continue
		}
		run = append(run, d)
	}
	return run
}

// portFree fails at once, naming --nats-listen, when its address is taken
// (by another pace up, say), where the NATS server would only time out.
func portFree(addr string) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--nats-listen %s: %w (another pace up or NATS server? pick another address, or \"\" for in-process only)", addr, err)
	}
	return ln.Close()
}
