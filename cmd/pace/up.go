package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/auth"
	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate"
	"github.com/pace-platform/pace/stages/visualizer"
)

type upOptions struct {
	data       string
	http       string
	natsListen string
	maxMemory  byteSize
	maxStore   byteSize
	syncAlways bool
	prefix     string
	monitor    monitorFlags
	fc         flowcontrolFlags
	manager    managerFlags
	control    controlFlags
	demo       bool
	demoDir    string
}

func newUpCmd(a *app) *cobra.Command {
	o := &upOptions{maxMemory: 256 << 20, maxStore: 10 << 30}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start Pace on this machine",
		Long: `Up starts Pace in one process: an embedded NATS server with JetStream
(its store in --data), every stream Pace needs, the dead-letter mover, and
an HTTP server with /healthz, /livez, /readyz, /metrics and the job API
(/submissions, /plugins, /openapi.json; see docs/api.md), and the monitor:
collector, processor and sinks (every job's progress as pace_job_* on /metrics,
and in InfluxDB with --influx-url; see docs/monitoring.md).

When ready it prints the NATS URL that workers and clients connect to and
the HTTP URL. Ctrl-C or SIGTERM stops it cleanly; data survives restarts.`,
		Example: `  pace up
  pace up --data /var/lib/pace --http :8080 --nats-listen 0.0.0.0:4222
  pace up --nats-listen ""   # in-process NATS only, no TCP port
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
	f.StringVar(&o.http, "http", "127.0.0.1:8080", "HTTP listen address for health and metrics")
	f.StringVar(&o.natsListen, "nats-listen", "127.0.0.1:4222", `NATS listen address for workers and clients ("" = in-process only)`)
	f.Var(&o.maxMemory, "max-memory", "JetStream memory limit, e.g. 256MiB")
	f.Var(&o.maxStore, "max-store", "JetStream disk limit, e.g. 10GiB")
	f.BoolVar(&o.syncAlways, "sync-always", false, "flush every write to disk before acknowledging it (slower, survives power loss)")
	f.StringVar(&o.prefix, "prefix", string(schemas.DefaultPrefix), "subject prefix of this installation")
	o.monitor.add(f)
	o.fc.add(f, "flowcontrol-config")
	o.manager.add(f)
	o.control.add(f)
	f.BoolVar(&o.demo, "demo", false, "run a demo batch job that needs several workers to meet its deadline, print its report and exit (0: deadline met)")
	return cmd
}

func (o *upOptions) run(ctx context.Context, a *app) error {
	if !schemas.Prefix(o.prefix).Valid() {
		return usageError("--prefix %q: must be letters, digits, '-' or '_'", o.prefix)
	}
	if _, _, err := net.SplitHostPort(o.http); err != nil {
		return usageError("--http %q: want host:port", o.http)
	}
	if o.natsListen != "" {
		if _, _, err := net.SplitHostPort(o.natsListen); err != nil {
			return usageError("--nats-listen %q: want host:port, or \"\" for in-process only", o.natsListen)
		}
	}
	if err := o.monitor.validate(); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	fcGate, err := o.fc.gate(reg) // API Priority and Fairness in front of the HTTP API
	if err != nil {
		return err
	}
	authn, err := o.fc.authenticator()
	if err != nil {
		return err
	}
	data, err := filepath.Abs(o.data)
	if err != nil {
		return usageError("--data %q: %v", o.data, err)
	}
	log := a.log.With("stage", "up")

	if err := o.control.validate(o.natsListen); err != nil {
		return err
	}
	srv, err := bus.StartServer(bus.ServerConfig{DataDir: data, Listen: o.natsListen,
		MaxMemory: int64(o.maxMemory), MaxStore: int64(o.maxStore), SyncAlways: o.syncAlways}, log)
	if err != nil {
		return err
	}
	defer srv.Shutdown() // last: after every client has drained
	c, err := bus.Connect(ctx, "", bus.WithServer(srv), bus.WithName("pace-up"), bus.WithLogger(a.log),
		bus.WithPrefix(schemas.Prefix(o.prefix)))
	if err != nil {
		return err
	}
	defer closeClient(c)
	if err := c.Provision(ctx, o.monitor.limits(int64(o.maxStore))); err != nil {
		return err
	}
	fcStore, err := gate.OpenConfig(ctx, c, a.log)
	if err != nil {
		return err
	}
	fcFile, err := o.fc.file()
	if err != nil {
		return err
	}
	mon, err := o.monitor.build(c, a.log)
	if err != nil {
		return err
	}

	control, err := o.control.build(c, fcGate, srv.ClientURL(), a.logLevel, a.log)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		return fmt.Errorf("--http %s: %w", o.http, err)
	}
	mux := opsHandler(c, reg, mon.collectors...) // other routes are added to mux
	mgr, api, err := o.manager.build(c, authn, ln.Addr().String(), a.log)
	if err != nil {
		return err
	}
	api.Register(mux)
	mux.Handle(apf.DebugPrefix, fcGate.DebugHandler())
	// The web UI's pages and event streams are long-running reads of the bus
	// and bypass APF, like log follows; its commands go through the API.
	root := http.NewServeMux()
	ui := visualizer.New(mgr, c, visualizer.Config{Open: authn == nil}, a.log.With("stage", "visualizer"))
	ui.SetFlowControl(fcGate)
	ui.Register(root)
	root.Handle("/", fcGate.Middleware(apf.Resources(apf.PaceGroup, "submissions"))(mux))
	handler := auth.Middleware(authn)(root)
	httpSrv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.DeadLetters(gctx) })
	g.Go(func() error { return fcGate.Run(gctx) })
	g.Go(func() error { return fcStore.Run(gctx, fcGate, fcFile) }) // live config in pace_flowcontrol, maintained every minute
	g.Go(func() error { return mgr.Run(gctx) })
	mon.start(gctx, g)
	for _, loop := range control {
		g.Go(func() error { return loop(gctx) })
	}
	g.Go(func() error {
		if err := httpSrv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return httpSrv.Shutdown(sctx)
	})

	if url := srv.ClientURL(); url != "" {
		fmt.Fprintf(a.stdout, "NATS: %s\n", url)
	} else {
		fmt.Fprintln(a.stdout, "NATS: in-process only (no TCP listener)")
	}
	fmt.Fprintf(a.stdout, "HTTP: http://%s\n", ln.Addr())
	fmt.Fprintf(a.stdout, "UI: http://%s%s\n", ln.Addr(), visualizer.Prefix)
	log.Info("pace is up", "data", data, "http", ln.Addr().String(), "nats", srv.ClientURL())
	if o.demo {
		g.Go(func() error { return runDemo(gctx, a, "http://"+ln.Addr().String()) })
	}

	err = g.Wait()
	log.Info("pace is shutting down")
	if errors.Is(err, errDemoDone) {
		return nil
	}
	return err
}

// opsHandler serves the health probes and Prometheus metrics of reg, with
// extra collectors (the monitor's pace_job_* and pace_monitor_* metrics).
func opsHandler(c *bus.Client, reg *prometheus.Registry, extra ...prometheus.Collector) *http.ServeMux {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		bus.NewStreamCollector(c))
	reg.MustRegister(extra...)
	ready := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := c.JetStream().AccountInfo(ctx); err != nil {
			http.Error(w, "jetstream: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", ready)
	mux.HandleFunc("GET /healthz", ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}
