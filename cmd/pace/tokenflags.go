package main

import (
	"os"

	"github.com/nats-io/nkeys"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus/natsauth"
)

// tokenFlags are the distributed stages' flags of NATS authentication by
// Pace token: the manager runs the authorization service of the servers'
// auth callout, the gate gives the workers it starts their job's token.
type tokenFlags struct {
	calloutKey  string // account nkey seed file signing the callout's answers (manager)
	jobTokenKey string // key of job tokens, shared by manager and gate
}

func (f *tokenFlags) addCallout(fs *pflag.FlagSet) {
	fs.StringVar(&f.calloutKey, "nats-callout-key", "", "account nkey seed file: run the NATS servers' auth callout service, which admits tenants by their --token-file token and workers by their job token (needs --token-file and --job-token-key; docs/security.md)")
	f.addJobTokens(fs)
}

func (f *tokenFlags) addJobTokens(fs *pflag.FlagSet) {
	fs.StringVar(&f.jobTokenKey, "job-token-key", "", "file of the key (at least 32 bytes) of job tokens, the same for the manager and the gate: workers then connect with their job's token (PACE_TOKEN), not with the stage's credentials")
}

// validateCallout refuses a callout without the tokens it checks.
func (f *tokenFlags) validateCallout(tokenFile string) error {
	if f.calloutKey != "" && (tokenFile == "" || f.jobTokenKey == "") {
		return usageError("--nats-callout-key needs --token-file (tenants' tokens) and --job-token-key (workers' tokens)")
	}
	return nil
}

// jobTokens reads --job-token-key; nil without it.
func (f *tokenFlags) jobTokens() (*natsauth.JobTokens, error) {
	if f.jobTokenKey == "" {
		return nil, nil
	}
	t, err := natsauth.ReadJobTokens(f.jobTokenKey)
	if err != nil {
		return nil, usageError("--job-token-key: %v", err)
	}
	return t, nil
}

// issuer reads --nats-callout-key's account seed.
func (f *tokenFlags) issuer() (nkeys.KeyPair, error) {
	seed, err := os.ReadFile(f.calloutKey)
	if err != nil {
		return nil, usageError("--nats-callout-key: %v", err)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, usageError("--nats-callout-key: %v", err)
	}
	if pub, err := kp.PublicKey(); err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, usageError("--nats-callout-key: not an account seed (nk -gen account makes one)")
	}
	return kp, nil
}
