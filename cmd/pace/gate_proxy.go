package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pace-platform/pace/auth"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/policysource"
)

type gateProxyOptions struct {
	fc       flowcontrolFlags
	http     httpFlags
	maxBody  byteSize
	upstream string
	// TLS to the upstream: CA bundle and client certificate (PEM files)
	upstreamCA, upstreamCert, upstreamKey string
	// the cluster whose FlowSchemas and priority levels classify requests
	kubeconfig  string
	writeStatus bool
}

// Upstream limits: connecting, the TLS handshake and the response headers
// are bounded (kube-apiserver answers within its 60 s request timeout and
// starts a watch at once); response bodies stream without a limit. Request
// bodies are read whole before admission, at most --max-body
// (kube-apiserver's own limit by default).
const (
	upstreamDialTimeout     = 10 * time.Second
	upstreamTLSTimeout      = 10 * time.Second
	upstreamHeaderTimeout   = 90 * time.Second
	upstreamMaxHeaderBytes  = 1 << 20
	upstreamIdleConnTimeout = 90 * time.Second
	proxyMaxBody            = 3 << 20
)

func newGateProxyCmd(a *app) *cobra.Command {
	o := &gateProxyOptions{}
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Reverse-proxy an HTTP API through API Priority and Fairness",
		Long: `Proxy listens on --http and forwards every request to --upstream once
API Priority and Fairness admits it. Requests are authenticated with
--token-file (else anonymous), parsed as Kubernetes API paths (verb from
method and path, API group, resource/subresource, namespace, name, list vs
get, watch), classified by FlowSchemas, charged seats by kube-apiserver's work estimator, and queued per priority
level; rejected ones get 429 with Retry-After. A request body is read whole
before the request queues: one larger than --max-body is refused with 413,
one not in within --body-timeout with 408. Watches hold their seat until
the upstream starts responding; exec, attach, port-forward, proxy and log
requests bypass the queues, as in kube-apiserver.

Seats: a list costs by the object count and average size of its resource,
which the proxy learns from the cluster-wide JSON lists it relays (unknown
resources cost one seat); a write costs one seat plus one final seat per 10
watches of its object in progress through the proxy.

With --tls-cert and --tls-key the proxy serves HTTPS. An https --upstream is
verified with --upstream-ca (else the system roots), and --upstream-cert and
--upstream-key present a client certificate. The client's Authorization
header is passed through, so the upstream authenticates every caller itself.

FlowSchemas and PriorityLevelConfigurations come from the cluster named by
--kubeconfig (normally the upstream), read through informers and applied as
they change, with the cluster's UIDs in the X-Kubernetes-PF-* headers; with
--write-status the proxy also writes each FlowSchema's Dangling condition, as
kube-apiserver does (it needs list and watch on both kinds, and patch on
flowschemas/status). Without --kubeconfig they come from --flowcontrol-config
over Pace's defaults, read again when the file changes, or are the defaults.

The proxy answers /healthz, /livez, /readyz, /metrics and
/debug/api_priority_and_fairness/dump_{priority_levels,queues,requests}
itself. With --token-file, /metrics is served to members of pace:admins,
system:masters and pace:metrics only, the dumps to the first two.`,
		Example: `  pace gate proxy --upstream https://127.0.0.1:6443 --upstream-ca ca.crt --http :8443 --tls-cert proxy.crt --tls-key proxy.key --token-file tokens.csv
  pace gate proxy --upstream https://127.0.0.1:6443 --upstream-ca ca.crt --kubeconfig proxy.kubeconfig --write-status
  pace gate proxy --upstream http://127.0.0.1:9000 --flowcontrol-config apf.yaml --max-requests-inflight 10 --max-mutating-requests-inflight 10`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), a) },
	}
	f := cmd.Flags()
	f.StringVar(&o.upstream, "upstream", "", "URL of the API to protect (required)")
	o.http.add(f, "127.0.0.1:8001", "HTTP listen address of the proxied API, health, metrics and the APF dumps")
	f.StringVar(&o.http.addr, "listen", "127.0.0.1:8001", "listen address")
	deprecate(f, "listen", "--http")
	noEnv(f, "listen") // PACE_LISTEN must not override --http
	f.StringVar(&o.upstreamCA, "upstream-ca", "", "CA file (PEM) that verifies an https --upstream (default: the system roots)")
	f.StringVar(&o.upstreamCert, "upstream-cert", "", "client certificate file (PEM) presented to the upstream")
	f.StringVar(&o.upstreamKey, "upstream-key", "", "private key file (PEM) of --upstream-cert")
	o.maxBody = proxyMaxBody
	f.Var(&o.maxBody, "max-body", "largest request body passed upstream (read whole before admission; 413 beyond)")
	o.fc.add(f)
	addPolicyFileAlias(f, &o.fc.config)
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster whose FlowSchemas and PriorityLevelConfigurations classify requests (instead of --flowcontrol-config)")
	f.BoolVar(&o.writeStatus, "write-status", false, "write each FlowSchema's Dangling condition back to the --kubeconfig cluster")
	return cmd
}

// policySource returns what keeps the gate's policy current: the cluster of
// --kubeconfig, the --flowcontrol-config file, or nothing (the defaults).
func (o *gateProxyOptions) policySource(log *slog.Logger) (policysource.Source, error) {
	switch {
	case o.kubeconfig != "" && o.fc.config != "":
		return nil, usageError("--kubeconfig and --flowcontrol-config exclude each other: the policy comes from the cluster or from the file")
	case o.writeStatus && o.kubeconfig == "":
		return nil, usageError("--write-status writes to the cluster of --kubeconfig: give it")
	case o.kubeconfig != "":
		cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, usageError("--kubeconfig: %v", err)
		}
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, usageError("--kubeconfig: %v", err)
		}
		return &policysource.Cluster{Client: kc, WriteStatus: o.writeStatus, Log: log}, nil
	case o.fc.config != "":
		return &policysource.File{Path: o.fc.config, Log: log}, nil
	}
	return nil, nil
}

// warnIgnored logs the objects the policy in force ignores.
func warnIgnored(log *slog.Logger, d *policy.Digest) {
	for _, name := range d.Dangling {
		log.Warn("flow schema dangling: its priority level does not exist", "flow_schema", name)
	}
	for _, name := range d.Broken {
		log.Warn("invalid flowcontrol object ignored", "object", name)
	}
}

// transport returns the HTTP transport to the upstream, with its TLS settings.
func (o *gateProxyOptions) transport(up *url.URL) (*http.Transport, error) {
	if (o.upstreamCert == "") != (o.upstreamKey == "") {
		return nil, usageError("--upstream-cert and --upstream-key go together: set both or neither")
	}
	if up.Scheme != "https" && (o.upstreamCA != "" || o.upstreamCert != "") {
		return nil, usageError("--upstream-ca, --upstream-cert and --upstream-key need an https --upstream, not %q", up.String())
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.upstreamCA != "" {
		pem, err := os.ReadFile(o.upstreamCA)
		if err != nil {
			return nil, usageError("--upstream-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usageError("--upstream-ca %q: no PEM certificate in it", o.upstreamCA)
		}
	}
	if o.upstreamCert != "" {
		cert, err := tls.LoadX509KeyPair(o.upstreamCert, o.upstreamKey)
		if err != nil {
			return nil, usageError("--upstream-cert %q / --upstream-key %q: %v", o.upstreamCert, o.upstreamKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: upstreamDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:        cfg,
		TLSHandshakeTimeout:    upstreamTLSTimeout,
		ResponseHeaderTimeout:  upstreamHeaderTimeout,
		MaxResponseHeaderBytes: upstreamMaxHeaderBytes,
		IdleConnTimeout:        upstreamIdleConnTimeout,
		MaxIdleConnsPerHost:    100, // as many as requests the levels run at once, roughly
		ForceAttemptHTTP2:      true,
	}, nil
}

func (o *gateProxyOptions) run(ctx context.Context, a *app) error {
	up, err := url.Parse(o.upstream)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return usageError("--upstream %q: want an absolute http or https URL such as https://127.0.0.1:6443", o.upstream)
	}
	if err := o.http.validate(); err != nil {
		return err
	}
	transport, err := o.transport(up)
	if err != nil {
		return err
	}
	defer transport.CloseIdleConnections()
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
	src, err := o.policySource(log)
	if err != nil {
		return err
	}
	warnIgnored(log, gate.Digest())
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.Transport = transport
	proxy.FlushInterval = -1 // stream watches
	proxy.ModifyResponse = func(res *http.Response) error {
		// The client sees the proxy's classification, not kube-apiserver's
		// of the relayed request besides it.
		res.Header.Del(apf.HeaderFlowSchemaUID)
		res.Header.Del(apf.HeaderPriorityLevelUID)
		return nil
	}
	proxy.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
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
	mux.Handle("GET /metrics", only(authn != nil, metricsReaders...)(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	mux.Handle(apf.DebugPrefix, only(authn != nil, dumpReaders...)(gate.DebugHandler()))
	mux.Handle("/", proxy)
	admitted := gate.Middleware(apf.KubeResolver, apf.LearnObjectCounts())(mux)
	handler := auth.Middleware(authn)(apf.ReadBody(o.http.bodyLimits(int64(o.maxBody), authn != nil))(admitted))

	ln, err := net.Listen("tcp", o.http.addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", o.http.addr, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return gate.Run(gctx) })
	if src != nil {
		// Requests are served once the source's policy is in force.
		first := make(chan struct{})
		var once sync.Once
		apply := func(ctx context.Context, objs policy.Objects) error {
			defer once.Do(func() { close(first) })
			if err := gate.Reconfigure(ctx, objs); err != nil {
				return err
			}
			warnIgnored(log, gate.Digest())
			return nil
		}
		g.Go(func() error { return src.Run(gctx, apply) })
		select {
		case <-first:
		case <-gctx.Done():
			_ = ln.Close()
			return g.Wait()
		}
	}
	g.Go(func() error { return o.http.serve(gctx, ln, handler, log) })
	fmt.Fprintf(a.stdout, "HTTP: %s\n", o.http.url(ln))
	log.Info("gate proxy is up", "listen", ln.Addr().String(), "tls", o.http.tls != nil, "upstream", up.String(),
		"server_concurrency_limit", gate.Config().ServerConcurrencyLimit(), "apf", o.fc.enabled)
	return g.Wait()
}
