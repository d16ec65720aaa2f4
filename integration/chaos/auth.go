package chaos

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
)

// busAuth is the chaos system's NATS authentication, that of a distributed
// installation (docs/security.md, "Tenants in distributed mode"): every
// stage logs in as its own user of deploy/nats/auth.conf, the managers
// answer the servers' auth callout, the test submits and reads as the
// tenant "chaos", and the workers the gates start connect with their job's
// token.
type busAuth struct {
	conf       string            // the cluster configuration including the auth
	serverEnv  []string          // the passwords and the callout's issuer
	passwords  map[string]string // by user
	calloutKey string            // files of the manager's and gate's flags
	jobKey     string
	tokenFile  string
}

// tenantToken is the token of the tenant that owns the test's job.
const tenantToken = "chaos-token"

// newBusAuth writes the cluster's configuration including auth.conf as
// shipped, and the keys and token file of the stages, into dir.
func newBusAuth(t *testing.T, dir string) *busAuth {
	t.Helper()
	a := &busAuth{passwords: map[string]string{}}
	for _, f := range []string{"cluster.conf", "limits.conf", "jetstream.conf", "auth.conf"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "cluster.conf" {
			data = append(data, "\ninclude ./auth.conf\n"...)
		}
		write(t, filepath.Join(dir, f), data)
	}
	a.conf = filepath.Join(dir, "cluster.conf")

	issuer, pub, err := natsauth.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := issuer.Seed()
	if err != nil {
		t.Fatal(err)
	}
	a.calloutKey = filepath.Join(dir, "callout.nk")
	write(t, a.calloutKey, seed)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	a.jobKey = filepath.Join(dir, "job-token.key")
	write(t, a.jobKey, key)
	a.tokenFile = filepath.Join(dir, "tokens.csv")
	write(t, a.tokenFile, []byte(tenantToken+",chaos,1\n"))

	a.serverEnv = []string{"PACE_NATS_CALLOUT_ISSUER=" + pub}
	for _, stage := range []string{"manager", "collector", "processor", "sink", "controller", "gate", "actuator", "visualizer", "admin"} {
		pw := rand.Text()
		a.passwords["pace-"+stage] = pw
		a.serverEnv = append(a.serverEnv, "PACE_NATS_"+strings.ToUpper(stage)+"_PASSWORD="+pw)
	}
	return a
}

// stage returns the flags and environment of a stage's process.
func (a *busAuth) stage(name string) (args, env []string) {
	args = []string{"--nats-user", "pace-" + name}
	env = []string{"PACE_NATS_PASSWORD=" + a.passwords["pace-"+name]}
	switch name {
	case "manager":
		args = append(args, "--nats-callout-key", a.calloutKey, "--token-file", a.tokenFile, "--job-token-key", a.jobKey)
	case "gate":
		args = append(args, "--job-token-key", a.jobKey)
	}
	return args, env
}

// admin is how the test's own client logs in.
func (a *busAuth) admin() bus.Option {
	return bus.WithUserPassword("pace-admin", a.passwords["pace-admin"])
}

func write(t *testing.T, file string, data []byte) {
	t.Helper()
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
