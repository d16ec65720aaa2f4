package main

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/internal/auth"
)

// flowcontrolFlags are the API Priority and Fairness flags of pace up and
// pace gate proxy, with kube-apiserver's names and defaults.
type flowcontrolFlags struct {
	config    string
	tokenFile string
	// the rest of the authentication chain (auth.Chain), kube-apiserver's flags
	clientCA                                                  string
	authKubeconfig                                            string
	reviewTTL, reviewNegativeTTL                              time.Duration
	failures                                                  auth.FailureBudget
	rhCA                                                      string
	rhAllowedNames, rhUserHeaders, rhGroupHeaders, rhPrefixes []string

	maxInflight int
	maxMutating int
	enabled     bool
	timeout     time.Duration
	fromStorage bool
}

// add registers the flags.
func (f *flowcontrolFlags) add(fs *pflag.FlagSet) {
	f.addSeats(fs)
	f.addTokens(fs)
}

// addPolicyFile registers --flowcontrol-config, the policy file read into p.
func addPolicyFile(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "flowcontrol-config", "", "FlowSchema and PriorityLevelConfiguration YAML applied over the defaults")
}

// addPolicyFileAlias keeps --config, the name pace gate proxy and pace apf
// classify first gave --flowcontrol-config, as a deprecated alias. It reads
// no environment variable, so PACE_CONFIG cannot override the new flag.
func addPolicyFileAlias(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "config", "", "deprecated alias of --flowcontrol-config")
	deprecate(fs, "config", "--flowcontrol-config")
	noEnv(fs, "config")
	fs.Lookup("flowcontrol-config").Usage += "; --config is its deprecated alias"
}

// addTokens registers --token-file alone (stages that authenticate callers
// without queuing them).
func (f *flowcontrolFlags) addTokens(fs *pflag.FlagSet) {
	fs.StringVar(&f.tokenFile, "token-file", "", `static tokens in kube's --token-auth-file CSV format: token,user,uid,"group1,group2" (none: everyone is system:anonymous)`)
	fs.StringVar(&f.clientCA, "client-ca-file", "", "CA file (PEM) verifying client certificates: the common name is the user, the organizations the groups (needs --tls-cert)")
	fs.StringVar(&f.authKubeconfig, "authentication-kubeconfig", "", "kubeconfig of a cluster whose TokenReview API verifies bearer tokens the token file does not know (service accounts, OIDC)")
	fs.DurationVar(&f.reviewTTL, "authentication-token-webhook-cache-ttl", auth.DefaultTokenReviewTTL, "how long a TokenReview's acceptance of a token is reused")
	fs.DurationVar(&f.reviewNegativeTTL, "authentication-token-webhook-negative-cache-ttl", auth.DefaultTokenReviewNegativeTTL,
		"how long a TokenReview's refusal of a token is reused (at most --authentication-token-webhook-cache-ttl)")
	fs.Float64Var(&f.failures.PerSecond, "authentication-failure-rate", auth.DefaultFailureBudget.PerSecond,
		"refused bearer tokens reviewed per second per client address, beyond the burst; more are answered 429 without a TokenReview")
	fs.IntVar(&f.failures.Burst, "authentication-failure-burst", auth.DefaultFailureBudget.Burst,
		"refused bearer tokens reviewed at once per client address (accepted tokens cost nothing)")
	fs.StringVar(&f.rhCA, "requestheader-client-ca-file", "", "CA file (PEM) of front proxies: only a client certificate it verifies may name the caller in --requestheader-username-headers (needs --tls-cert)")
	fs.StringSliceVar(&f.rhAllowedNames, "requestheader-allowed-names", nil, "common names a front proxy's certificate may have (empty: any the CA verifies)")
	fs.StringSliceVar(&f.rhUserHeaders, "requestheader-username-headers", auth.DefaultUserHeaders, "headers naming the user, from a front proxy")
	fs.StringSliceVar(&f.rhGroupHeaders, "requestheader-group-headers", auth.DefaultGroupHeaders, "headers naming the groups, from a front proxy")
	fs.StringSliceVar(&f.rhPrefixes, "requestheader-extra-headers-prefix", auth.DefaultExtraPrefixes, "prefixes of headers carrying extra identity, from a front proxy")
}

// authenticates reports whether callers are identified (else every caller
// is system:anonymous).
func (f *flowcontrolFlags) authenticates() bool {
	return f.tokenFile != "" || f.clientCA != "" || f.authKubeconfig != "" || f.rhCA != ""
}

// clientCerts asks h's TLS server for client certificates when an
// authenticator verifies them (each against its own CA).
func (f *flowcontrolFlags) clientCerts(h *httpFlags) error {
	if f.clientCA == "" && f.rhCA == "" {
		return nil
	}
	if h.tls == nil {
		return usageError("--client-ca-file and --requestheader-client-ca-file verify TLS client certificates: serve HTTPS with --tls-cert and --tls-key")
	}
	h.tls.ClientAuth = tls.RequestClientCert
	return nil
}

// requestHeader returns the front-proxy authenticator, nil without
// --requestheader-client-ca-file.
func (f *flowcontrolFlags) requestHeader() (*auth.RequestHeader, error) {
	if f.rhCA == "" {
		return nil, nil
	}
	roots, err := auth.LoadCAs(f.rhCA)
	if err != nil {
		return nil, usageError("--requestheader-client-ca-file: %v", err)
	}
	return &auth.RequestHeader{Roots: roots, AllowedNames: f.rhAllowedNames,
		UserHeaders: f.rhUserHeaders, GroupHeaders: f.rhGroupHeaders, ExtraPrefixes: f.rhPrefixes}, nil
}

// addSeats registers the APF flags without --token-file (the bus gate,
// whose requests carry their user).
func (f *flowcontrolFlags) addSeats(fs *pflag.FlagSet) {
	addPolicyFile(fs, &f.config)
	fs.IntVar(&f.maxInflight, "max-requests-inflight", 400, "seats for read-only requests (with APF: added to the mutating ones to form the server concurrency limit)")
	fs.IntVar(&f.maxMutating, "max-mutating-requests-inflight", 200, "seats for mutating requests")
	fs.BoolVar(&f.enabled, "enable-priority-and-fairness", true, "queue requests by API Priority and Fairness; false: only the two max-inflight limits")
	fs.DurationVar(&f.timeout, "request-timeout", apf.DefaultRequestTimeout,
		"a request's time when it names none with ?timeout=, and the most it may name; it waits in its queue for a quarter of it (not a watch: 15s)")
	fs.BoolVar(&f.fromStorage, "consistent-reads-from-storage", false,
		"charge lists without a resourceVersion as reads from etcd, as kube-apiserver serves them when its etcd is older than 3.4.31/3.5.13 (default: from its watch cache)")
}

// file reads the configured objects (none without a file); a bad file is
// rejected input.
func (f *flowcontrolFlags) file() (policy.Objects, error) {
	if f.config == "" {
		return policy.Objects{}, nil
	}
	objs, err := policy.LoadFile(f.config)
	if err != nil {
		return policy.Objects{}, rejected(fmt.Errorf("--flowcontrol-config: %w", err))
	}
	return objs, nil
}

// policy reads the configured objects over the defaults.
func (f *flowcontrolFlags) policy() (policy.Objects, error) {
	file, err := f.file()
	if err != nil {
		return policy.Objects{}, err
	}
	return policy.Overlay(policy.Defaults(), file), nil
}

// authenticator returns the configured authentication chain in
// kube-apiserver's order (front proxy, client certificate, token file,
// TokenReview), or nil when none is configured (everyone is anonymous).
func (f *flowcontrolFlags) authenticator() (auth.Authenticator, error) {
	var chain []auth.Authenticator
	rh, err := f.requestHeader()
	if err != nil {
		return nil, err
	}
	if rh != nil {
		chain = append(chain, rh)
	}
	if f.clientCA != "" {
		roots, err := auth.LoadCAs(f.clientCA)
		if err != nil {
			return nil, usageError("--client-ca-file: %v", err)
		}
		chain = append(chain, auth.ClientCert{Roots: roots})
	}
	if f.tokenFile != "" {
		tf, err := auth.LoadTokenFile(f.tokenFile)
		if err != nil {
			return nil, rejected(fmt.Errorf("--token-file: %w", err))
		}
		chain = append(chain, tf)
	}
	if f.authKubeconfig != "" {
		if f.failures.PerSecond <= 0 || f.failures.Burst <= 0 {
			return nil, usageError("--authentication-failure-rate %v and --authentication-failure-burst %d: both must be positive",
				f.failures.PerSecond, f.failures.Burst)
		}
		// The reviews' own client and rate limit: not shared with the
		// informers, and above client-go's default 5 per second, burst 10,
		// which a handful of new users would exhaust.
		kc, err := kubeClient("--authentication-kubeconfig", f.authKubeconfig, withRate(reviewQPS, reviewBurst))
		if err != nil {
			return nil, err
		}
		chain = append(chain, &auth.TokenReview{Reviews: kc.AuthenticationV1().TokenReviews(), TTL: f.reviewTTL,
			NegativeTTL: f.reviewNegativeTTL, Failures: f.failures})
	}
	switch len(chain) {
	case 0:
		return nil, nil
	case 1:
		return chain[0], nil
	}
	return auth.Chain(chain...), nil
}

// gate builds the APF gate and registers its metrics on reg.
func (f *flowcontrolFlags) gate(reg prometheus.Registerer) (*apf.Gate, error) {
	cfg := apf.Config{MaxRequestsInflight: f.maxInflight, MaxMutatingRequestsInflight: f.maxMutating, Disabled: !f.enabled,
		RequestTimeout: f.timeout, ConsistentReadsFromStorage: f.fromStorage}
	if errs := cfg.Validate(); len(errs) > 0 {
		flags := map[string]string{"maxRequestsInflight": "--max-requests-inflight", "maxMutatingRequestsInflight": "--max-mutating-requests-inflight",
			"requestTimeout": "--request-timeout"}
		return nil, usageError("%s %v: %s", flags[errs[0].Field], errs[0].BadValue, errs[0].Detail)
	}
	objs, err := f.policy()
	if err != nil {
		return nil, err
	}
	m, err := apf.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("flowcontrol metrics: %w", err)
	}
	return apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, cfg, objs, m)
}

// The TokenReview client's rate limit (kube-apiserver's delegated
// authentication allows its client 200 per second, burst 400).
const (
	reviewQPS   = 100
	reviewBurst = 200
)

// withRate sets a client's rate limit.
func withRate(qps float32, burst int) func(*rest.Config) {
	return func(c *rest.Config) { c.QPS, c.Burst = qps, burst }
}

// kubeClient is a clientset for the cluster of the kubeconfig file path,
// given by flag, tuned by opts; an unusable file is a usage error naming
// the flag.
func kubeClient(flag, path string, opts ...func(*rest.Config)) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, usageError("%s: %v", flag, err)
	}
	for _, o := range opts {
		o(cfg)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, usageError("%s: %v", flag, err)
	}
	return kc, nil
}
