package kubernetes

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	const url = "tls://pace-nats.pace.svc:4222"
	jobToken := func(job string) string { return "job:" + job + ":mac" }
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // a part of the error; empty means valid
	}{
		{"url only", Config{NATSURL: url}, ""},
		{"default keys", Config{NATSURL: url, WorkerSecret: "pace-worker-nats"}, ""},
		{"creds and CA", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"creds", "ca.crt"}}, ""},
		{"nkey and client certificate", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"nkey", "tls.crt", "tls.key"}}, ""},
		{"no url", Config{WorkerSecret: "w"}, "nats_url: Required value"},
		{"redis front", Config{NATSURL: url, RedisAddr: "pace-redis.pace.svc:6379"}, ""},
		{"redis front without a port", Config{NATSURL: url, RedisAddr: "pace-redis.pace.svc"}, `redis_addr: Invalid value: "pace-redis.pace.svc": want host:port`},
		{"password in the url", Config{NATSURL: "nats://n1:4222,nats://pace-worker:hunter2@n2:4222"}, "nats_url: Forbidden: must not carry credentials"},
		{"token in the url", Config{NATSURL: "tls://s3cr3t@n1:4222"}, "nats_url: Forbidden: must not carry credentials"},
		{"keys without a secret", Config{NATSURL: url, WorkerSecretKeys: []string{"user"}}, "worker_secret_keys: Forbidden: needs worker_secret"},
		{"bad secret name", Config{NATSURL: url, WorkerSecret: "Pace_Worker"}, `worker_secret: Invalid value: "Pace_Worker": a lowercase RFC 1123 subdomain`},
		{"unknown key", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"user", "password", "token"}},
			`worker_secret_keys[2]: Unsupported value: "token": supported values: "user", "password", "creds"`},
		{"key twice", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"creds", "creds"}}, `worker_secret_keys[1]: Duplicate value: "creds"`},
		{"user without password", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"user", "ca.crt"}}, "user and password go together"},
		{"two ways to authenticate", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"user", "password", "nkey"}}, "exclude each other"},
		{"certificate without key", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"creds", "tls.crt"}}, "tls.crt and tls.key go together"},
		{"job token and CA (deploy/kubernetes)", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"ca.crt"}, JobToken: jobToken}, ""},
		{"job token and client certificate", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"tls.crt", "tls.key"}, JobToken: jobToken}, ""},
		{"job token and the default keys", Config{NATSURL: url, WorkerSecret: "w", JobToken: jobToken},
			`worker_secret_keys: Invalid value: "user,password,ca.crt": workers authenticate with their job's token`},
		{"job token and creds", Config{NATSURL: url, WorkerSecret: "w", WorkerSecretKeys: []string{"creds"}, JobToken: jobToken},
			"the worker Secret may hold only ca.crt, tls.crt and tls.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.cfg.Validate()
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("Validate() = %v, want no error", errs.ToAggregate())
			case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", errs.ToAggregate(), tc.want)
			case len(errs) > 0 && (strings.Contains(errs.ToAggregate().Error(), "hunter2") || strings.Contains(errs.ToAggregate().Error(), "s3cr3t")):
				t.Errorf("Validate() = %v: it shows the credentials", errs.ToAggregate())
			}
		})
	}
}

func TestNewRefusesAnInvalidConfig(t *testing.T) {
	if _, err := New(nil, Config{NATSURL: "nats://n:4222", WorkerSecret: "w", WorkerSecretKeys: []string{"user"}}); err == nil || !strings.Contains(err.Error(), "user and password go together") {
		t.Errorf("New = %v, want the validation error", err)
	}
}
