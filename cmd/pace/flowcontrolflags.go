package main

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/auth"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
)

// flowcontrolFlags are the API Priority and Fairness flags of pace up and
// pace gate proxy, with kube-apiserver's names and defaults.
type flowcontrolFlags struct {
	config      string
	tokenFile   string
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

// authenticator returns the token-file authenticator, or nil when none is
// configured (everyone is anonymous).
func (f *flowcontrolFlags) authenticator() (auth.Authenticator, error) {
	if f.tokenFile == "" {
		return nil, nil
	}
	tf, err := auth.LoadTokenFile(f.tokenFile)
	if err != nil {
		return nil, rejected(fmt.Errorf("--token-file: %w", err))
	}
	return tf, nil
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
