package kubernetes

import (
	"net"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Config configures a Runtime: the gate's --pod-nats-url,
// --kube-worker-secret and --kube-worker-secret-keys.
type Config struct {
	// NATSURL is what worker pods connect to (PACE_NATS_URL). Required.
	NATSURL string `json:"nats_url"`
	// WorkerSecret names a Secret in each job's namespace that holds the
	// workers' NATS credentials and CA. Pods reference its keys (see
	// WorkerSecretKeys); the runtime never reads it. Empty means none: the
	// workers get only the URL.
	WorkerSecret string `json:"worker_secret,omitempty"`
	// WorkerSecretKeys are the keys WorkerSecret holds, among those of
	// SecretKeys. Empty means DefaultWorkerSecretKeys.
	WorkerSecretKeys []string `json:"worker_secret_keys,omitempty"`
	// JobToken, when set, returns the NATS token of a job's workers, given
	// to its pods as PACE_TOKEN: on a bus that authenticates tenants (pace
	// up --token-file, pace stage gate --job-token-key) it lets them reach
	// their job and nothing else. The token is then in the Job's pod
	// template, readable by whoever may read Jobs in its namespace. The
	// worker Secret then holds no credentials: only the CA and a client
	// certificate (WorkerSecretKeys ca.crt, tls.crt, tls.key).
	JobToken func(job string) string `json:"-"`
	// RedisAddr is the host:port of the Redis front that worker pods
	// reach (docs/asperathos.md): pods get REDIS_HOST, REDIS_PORT and
	// REDIS_QUEUE (their job's token with JobToken, else its id), as
	// Asperathos workers read them. Empty means none.
	RedisAddr string `json:"redis_addr,omitempty"`
}

// SecretKey is how a key of the worker Secret reaches `pace worker` (and
// the SDK's flags): as the variable Env, holding the key's value or, for
// a file, the path of the key in the read-only mount at CredentialsDir.
type SecretKey struct {
	Key  string
	Env  string
	File bool
}

// CredentialsDir is where worker pods mount the file keys of the worker
// Secret, read-only.
const CredentialsDir = "/etc/pace/nats"

// SecretKeys returns the keys a worker Secret may hold: exactly the NATS
// settings `pace worker` reads from its environment.
func SecretKeys() []SecretKey { return slices.Clone(secretKeys) }

var secretKeys = []SecretKey{
	{Key: "user", Env: "PACE_NATS_USER"},
	{Key: "password", Env: "PACE_NATS_PASSWORD"},
	{Key: "creds", Env: "PACE_NATS_CREDS", File: true},
	{Key: "nkey", Env: "PACE_NATS_NKEY", File: true},
	{Key: "ca.crt", Env: "PACE_NATS_CA", File: true},
	{Key: "tls.crt", Env: "PACE_NATS_CERT", File: true},
	{Key: "tls.key", Env: "PACE_NATS_KEY", File: true},
}

// DefaultWorkerSecretKeys returns the keys of a worker Secret for a NATS
// server with passwords and TLS, as deploy/kubernetes runs it.
func DefaultWorkerSecretKeys() []string { return []string{"user", "password", "ca.crt"} }

// keys returns the worker Secret's keys, defaulted.
func (c Config) keys() []string {
	if len(c.WorkerSecretKeys) == 0 {
		return DefaultWorkerSecretKeys()
	}
	return c.WorkerSecretKeys
}

// Validate checks c. The URL must not carry credentials: they would be in
// every Job. A worker Secret's keys must be known, each given once,
// and name one way to authenticate at most (user and password, creds or
// nkey), as `pace worker` accepts, none beside a JobToken; a user needs its
// password and a client certificate its key.
func (c Config) Validate() (errs field.ErrorList) {
	if strings.TrimSpace(c.NATSURL) == "" {
		errs = append(errs, field.Required(field.NewPath("nats_url"), "worker pods need the URL of the NATS servers"))
	}
	for raw := range strings.SplitSeq(c.NATSURL, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil { // the value is not echoed
			errs = append(errs, field.Forbidden(field.NewPath("nats_url"),
				"must not carry credentials (user@ or user:password@), which every Job would hold: give worker pods theirs by the worker Secret"))
			break
		}
	}
	if c.RedisAddr != "" {
		if _, port, err := net.SplitHostPort(c.RedisAddr); err != nil || port == "" || port == "0" {
			errs = append(errs, field.Invalid(field.NewPath("redis_addr"), c.RedisAddr, "want host:port of the Redis front, e.g. pace-redis.pace.svc:6379"))
		}
	}
	if c.WorkerSecret == "" {
		if len(c.WorkerSecretKeys) > 0 {
			errs = append(errs, field.Forbidden(field.NewPath("worker_secret_keys"), "needs worker_secret"))
		}
		return errs
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.WorkerSecret) {
		errs = append(errs, field.Invalid(field.NewPath("worker_secret"), c.WorkerSecret, msg))
	}
	p := field.NewPath("worker_secret_keys")
	known := make([]string, len(secretKeys))
	for i, k := range secretKeys {
		known[i] = k.Key
	}
	seen := map[string]bool{}
	for i, k := range c.WorkerSecretKeys {
		switch {
		case !slices.Contains(known, k):
			errs = append(errs, field.NotSupported(p.Index(i), k, known))
		case seen[k]:
			errs = append(errs, field.Duplicate(p.Index(i), k))
		}
		seen[k] = true
	}
	keys := c.keys()
	has := func(k string) bool { return slices.Contains(keys, k) }
	if has("user") != has("password") {
		errs = append(errs, field.Invalid(p, strings.Join(keys, ","), "user and password go together"))
	}
	modes := boolCount(has("user") || has("password"), has("creds"), has("nkey"))
	switch {
	case modes > 1:
		errs = append(errs, field.Invalid(p, strings.Join(keys, ","), "user/password, creds and nkey exclude each other: choose one way to authenticate"))
	case modes == 1 && c.JobToken != nil:
		errs = append(errs, field.Invalid(p, strings.Join(keys, ","),
			"workers authenticate with their job's token (PACE_TOKEN): the worker Secret may hold only ca.crt, tls.crt and tls.key"))
	}
	if has("tls.crt") != has("tls.key") {
		errs = append(errs, field.Invalid(p, strings.Join(keys, ","), "tls.crt and tls.key go together"))
	}
	return errs
}

func boolCount(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
