package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/flowcontrol/policysource"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/flagvalue"
	"github.com/pace-platform/pace/internal/kubestatus"
	"github.com/pace-platform/pace/stages/gate/kubeproxy"
)

type gateProxyOptions struct {
	fc       flowcontrolFlags
	http     httpFlags
	maxBody  flagvalue.Bytes
	upstream string
	// TLS to the upstream: CA bundle and client certificate (PEM files)
	upstreamCA, upstreamCert, upstreamKey string
	// the cluster whose FlowSchemas and priority levels classify requests
	kubeconfig  string
	writeStatus bool
	// upstream identity: the proxy's own, forwarding the caller's by impersonation
	impersonate       bool
	upstreamTokenFile string
	// delegated authorization of the proxy's own endpoints
	authzKubeconfig                string
	authorizedTTL, unauthorizedTTL time.Duration
}

// proxyMaxBody bounds request bodies, read whole before admission: the
// default of --max-body, kube-apiserver's own limit.
const proxyMaxBody = 3 << 20

func newGateProxyCmd(a *app) *cobra.Command {
	o := &gateProxyOptions{}
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Reverse-proxy an HTTP API through API Priority and Fairness",
		Long: `Proxy listens on --http and forwards every request to --upstream once
API Priority and Fairness admits it. Requests are authenticated (below;
else anonymous), parsed as Kubernetes API paths (verb from method and path,
API group, resource/subresource, namespace, name, list vs get, watch),
classified by FlowSchemas, charged seats by kube-apiserver's work
estimator, and queued per priority level; rejected ones get 429 with
Retry-After. A request body is read whole before the request queues: one
larger than --max-body is refused with 413, one not in within
--body-timeout with 408. Watches hold their seat until
the upstream starts responding; exec, attach, port-forward, proxy and log
requests bypass the queues, as in kube-apiserver. Upgrades (exec, attach,
port-forward and proxy over SPDY/3.1 or WebSocket) reach the upstream over
HTTP/1.1, everything else over HTTP/2 when the upstream speaks it.

Seats: a list costs by the object count and average size of its resource,
which the proxy learns from the cluster-wide JSON lists it relays (unknown
resources cost one seat); a write costs one seat plus one final seat per 10
watches of its object in progress through the proxy.

With --tls-cert and --tls-key the proxy serves HTTPS. An https --upstream is
verified with --upstream-ca (else the system roots), and --upstream-cert and
--upstream-key present a client certificate.

Callers are identified as kube-apiserver identifies them, in its order: a
front proxy's X-Remote-* headers, trusted only with a client certificate from
--requestheader-client-ca-file; a client certificate verified by
--client-ca-file (common name and organizations); a bearer token of
--token-file, or one the cluster of --authentication-kubeconfig accepts
(TokenReview: one review per token however many requests carry it,
acceptances cached --authentication-token-webhook-cache-ttl, refusals
--authentication-token-webhook-negative-cache-ttl; refused tokens are
charged to their client address, which gets 429 once it has spent
--authentication-failure-burst, refilled at --authentication-failure-rate).
X-Remote-* headers from anyone else are dropped, and a client's own
Impersonate-* headers are refused (403). Without --impersonate the caller's
Authorization header is passed on and the upstream authenticates the caller
again; with --impersonate the proxy authenticates upstream as itself
(--upstream-token-file or --upstream-cert) and names the caller in
Impersonate-User, -Uid, -Group and -Extra-*, so the cluster authorizes the
caller, whatever its credentials were (the proxy's identity needs the
impersonate verb: examples/flowcontrol/gate-proxy-rbac.yaml has its rights).

FlowSchemas and PriorityLevelConfigurations come from the cluster named by
--kubeconfig (normally the upstream), read through informers and applied as
they change, with the cluster's UIDs in the X-Kubernetes-PF-* headers; with
--write-status the proxy also writes each FlowSchema's Dangling condition, as
kube-apiserver does (it needs list and watch on both kinds, and patch on
flowschemas/status). Without --kubeconfig they come from --flowcontrol-config
over Pace's defaults, read again when the file changes, or are the defaults.

What the proxy answers itself (401, 403, 408, 413, 429, 502, 504, ...)
carries a Status object as kube-apiserver writes it, so client-go and
kubectl read it as kube's.

With --authorization-kubeconfig, /metrics and the dumps are served to
whom the cluster allows on the path (a SubjectAccessReview of the
non-resource URL, as kube's delegated authorizer: RBAC's nonResourceURLs,
system:monitoring; decisions cached --authorization-webhook-cache-*-ttl).

/livez and /healthz concern the proxy alone; /readyz fails (500) while the
upstream cannot be reached or its own /readyz fails, asked at most every
second (?verbose lists the checks, as kube-apiserver does).

The proxy answers /healthz, /livez, /readyz, /metrics and
/debug/api_priority_and_fairness/dump_{priority_levels,queues,requests}
itself. Without --authorization-kubeconfig, when callers authenticate,
/metrics is served to members of pace:admins, system:masters and
pace:metrics only, the dumps to the first two.`,
		Example: `  pace gate proxy --upstream https://127.0.0.1:6443 --upstream-ca ca.crt --http :8443 --tls-cert proxy.crt --tls-key proxy.key --token-file tokens.csv
  pace gate proxy --upstream https://127.0.0.1:6443 --upstream-ca ca.crt --kubeconfig proxy.kubeconfig --write-status
  pace gate proxy --upstream https://127.0.0.1:6443 --upstream-ca ca.crt --tls-cert proxy.crt --tls-key proxy.key --client-ca-file clients.crt --authentication-kubeconfig proxy.kubeconfig --impersonate --upstream-token-file proxy.token
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
	f.BoolVar(&o.impersonate, "impersonate", false, "authenticate upstream as the proxy (--upstream-cert/--upstream-key or --upstream-token-file) and pass the caller's identity as Impersonate-* headers")
	f.StringVar(&o.upstreamTokenFile, "upstream-token-file", "", "file holding the bearer token the proxy presents upstream with --impersonate")
	f.StringVar(&o.authzKubeconfig, "authorization-kubeconfig", "", "kubeconfig of a cluster whose SubjectAccessReview API decides who may read /metrics and the APF dumps (instead of fixed groups)")
	f.DurationVar(&o.authorizedTTL, "authorization-webhook-cache-authorized-ttl", auth.DefaultAuthorizedTTL, "how long a SubjectAccessReview's allowance is reused")
	f.DurationVar(&o.unauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", auth.DefaultUnauthorizedTTL, "how long a SubjectAccessReview's refusal is reused")
	return cmd
}

// upstreamToken reads --upstream-token-file; "" without one.
func (o *gateProxyOptions) upstreamToken() (string, error) {
	if o.upstreamTokenFile != "" && !o.impersonate {
		return "", usageError("--upstream-token-file is the proxy's identity with --impersonate; without it each caller's own Authorization is passed on")
	}
	if o.impersonate && o.upstreamTokenFile == "" && o.upstreamCert == "" {
		return "", usageError("--impersonate needs the proxy's own upstream identity: --upstream-cert and --upstream-key, or --upstream-token-file")
	}
	if o.upstreamTokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(o.upstreamTokenFile)
	if err != nil {
		return "", usageError("--upstream-token-file: %v", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", usageError("--upstream-token-file %s: empty", o.upstreamTokenFile)
	}
	return token, nil
}

// readers returns who may read the proxy's own endpoints (/metrics, the APF
// dumps): whom the cluster of --authorization-kubeconfig allows on the path
// (a SubjectAccessReview, as kube's delegated authorizer); else, when
// callers authenticate, the members of groups; else everyone.
func (o *gateProxyOptions) readers(authenticated bool, errs []auth.Option) (func(groups []string) func(http.Handler) http.Handler, error) {
	if o.authzKubeconfig != "" {
		kc, err := kubeClient("--authorization-kubeconfig", o.authzKubeconfig, withRate(reviewQPS, reviewBurst))
		if err != nil {
			return nil, err
		}
		sar := &auth.SubjectAccessReview{Reviews: kc.AuthorizationV1().SubjectAccessReviews(),
			AuthorizedTTL: o.authorizedTTL, UnauthorizedTTL: o.unauthorizedTTL}
		mw := sar.Middleware(errs...)
		return func([]string) func(http.Handler) http.Handler { return mw }, nil
	}
	if !authenticated {
		return func([]string) func(http.Handler) http.Handler { return func(h http.Handler) http.Handler { return h } }, nil
	}
	return func(groups []string) func(http.Handler) http.Handler { return auth.RequireWith(errs, groups...) }, nil
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
		kc, err := kubeClient("--kubeconfig", o.kubeconfig)
		if err != nil {
			return nil, err
		}
		return &policysource.Cluster{Client: kc, WriteStatus: o.writeStatus, Log: log}, nil
	case o.fc.config != "":
		return &policysource.File{Path: o.fc.config, Log: log}, nil
	}
	return nil, nil
}

// transport returns the HTTP transport to the upstream, with its TLS settings.
func (o *gateProxyOptions) transport(up *url.URL) (*kubeproxy.Transport, error) {
	if (o.upstreamCert == "") != (o.upstreamKey == "") {
		return nil, usageError("--upstream-cert and --upstream-key go together: set both or neither")
	}
	if up.Scheme != "https" && (o.upstreamCA != "" || o.upstreamCert != "") {
		return nil, usageError("--upstream-ca, --upstream-cert and --upstream-key need an https --upstream, not %q", up.String())
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.upstreamCA != "" {
		roots, err := auth.LoadCAs(o.upstreamCA)
		if err != nil {
			return nil, usageError("--upstream-ca: %v", err)
		}
		cfg.RootCAs = roots
	}
	if o.upstreamCert != "" {
		cert, err := tls.LoadX509KeyPair(o.upstreamCert, o.upstreamKey)
		if err != nil {
			return nil, usageError("--upstream-cert %q / --upstream-key %q: %v", o.upstreamCert, o.upstreamKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return kubeproxy.NewTransport(cfg), nil
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
	if err := o.fc.clientCerts(&o.http); err != nil {
		return err
	}
	authn, err := o.fc.authenticator()
	if err != nil {
		return err
	}
	rh, err := o.fc.requestHeader()
	if err != nil {
		return err
	}
	token, err := o.upstreamToken()
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
	kubeproxy.WarnIgnored(log, gate.Digest())
	proxy := kubeproxy.New(kubeproxy.Config{Upstream: up, Transport: transport, Impersonate: o.impersonate,
		Token: token, RequestHeader: rh, Log: log})
	readers, err := o.readers(authn != nil, []auth.Option{auth.WithErrorWriter(kubestatus.Write)}) // the proxy's own answers, as kube-apiserver's
	if err != nil {
		return err
	}
	srv := &kubeproxy.Server{Proxy: proxy, Gate: gate, Metrics: reg, Authn: authn,
		Body: o.http.bodyLimits(int64(o.maxBody), authn != nil), Ready: kubeproxy.NewReadiness(transport, up, token, log),
		MetricsReaders: readers(auth.ReadMetrics), DumpReaders: readers(auth.ReadDumps), Policy: src, Log: log}

	ln, err := net.Listen("tcp", o.http.addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", o.http.addr, err)
	}
	defer ln.Close() //nolint:errcheck // closed by the server already when it ran
	// Requests are served once the source's policy is in force.
	return srv.Run(ctx, func(ctx context.Context, h http.Handler) error {
		fmt.Fprintf(a.stdout, "HTTP: %s\n", o.http.url(ln))
		log.Info("gate proxy is up", "listen", ln.Addr().String(), "tls", o.http.tls != nil, "upstream", up.String(),
			"server_concurrency_limit", gate.Config().ServerConcurrencyLimit(), "apf", o.fc.enabled)
		return o.http.serve(ctx, ln, h, log)
	})
}
