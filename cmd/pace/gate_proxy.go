package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/auth"
	"github.com/pace-platform/pace/flowcontrol/apf"
)

type gateProxyOptions struct {
	fc       flowcontrolFlags
	upstream string
	listen   string
}

func newGateProxyCmd(a *app) *cobra.Command {
	o := &gateProxyOptions{}
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Reverse-proxy an HTTP API through API Priority and Fairness",
		Long: `Proxy listens on --listen and forwards every request to --upstream once
API Priority and Fairness admits it. Requests are authenticated with
--token-file (else anonymous), parsed as Kubernetes API paths (verb from
method and path, API group, resource/subresource, namespace, name, list vs
get, watch), classified by the FlowSchemas of --config over the defaults,
and queued per priority level; rejected ones get 429 with Retry-After.
Watches hold their seat until the upstream starts responding; exec, attach,
port-forward, proxy and log requests bypass the queues, as in kube-apiserver.

The proxy answers /healthz, /livez, /readyz, /metrics and
/debug/api_priority_and_fairness/dump_{priority_levels,queues,requests}
itself.`,
		Example: `  pace gate proxy --upstream https://127.0.0.1:6443 --listen :8443 --token-file tokens.csv
  pace gate proxy --upstream http://127.0.0.1:9000 --config apf.yaml --max-requests-inflight 10 --max-mutating-requests-inflight 10`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), a) },
	}
	f := cmd.Flags()
	f.StringVar(&o.upstream, "upstream", "", "URL of the API to protect (required)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8001", "listen address")
	o.fc.add(f, "config")
	return cmd
}

func (o *gateProxyOptions) run(ctx context.Context, a *app) error {
	up, err := url.Parse(o.upstream)
	if err != nil || up.Scheme == "" || up.Host == "" {
		return usageError("--upstream %q: want an absolute URL such as http://127.0.0.1:6443", o.upstream)
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return usageError("--listen %q: want host:port", o.listen)
	}
	authn, err := o.fc.authenticator()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	gate, err := o.fc.gate(reg)
	if err != nil {
		return err
	}
	log := a.log.With("stage", "gate-proxy")
	for _, name := range gate.Digest().Dangling {
		log.Warn("flow schema dangling: its priority level does not exist", "flow_schema", name)
	}
	for _, name := range gate.Digest().Broken {
		log.Warn("invalid flowcontrol object ignored", "object", name)
	}
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.FlushInterval = -1 // stream watches
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		log.Warn("upstream failed", "err", err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = fmt.Fprintf(w, `{"error_code":502,"error_name":"BadGateway","error_message":%q}`+"\n", err.Error())
	}

	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/livez", ok)
	mux.HandleFunc("/readyz", ok)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle(apf.DebugPrefix, gate.DebugHandler())
	mux.Handle("/", proxy)
	handler := auth.Middleware(authn)(gate.Middleware(apf.KubeResolver)(mux))

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return gate.Run(gctx) })
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	fmt.Fprintf(a.stdout, "HTTP: http://%s\n", ln.Addr())
	log.Info("gate proxy is up", "listen", ln.Addr().String(), "upstream", up.String(),
		"server_concurrency_limit", gate.Config().ServerConcurrencyLimit(), "apf", o.fc.enabled)
	return g.Wait()
}
