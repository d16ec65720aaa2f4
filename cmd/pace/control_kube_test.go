package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestKubeWorkerSecretFlags checks the gate's worker Secret flags before
// anything connects: each bad value is a usage error naming its flag, and
// a good one gets past validation to the NATS connection.
func TestKubeWorkerSecretFlags(t *testing.T) {
	const secret = "hunter2-Secret"
	closed := "nats://" + freeAddr(t)
	gate := []string{"stage", "gate", "--nats", closed, "--connect-timeout", "200ms", "--log-format", "text", "--actuator", "none"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		msg  string
	}{
		{"valid", []string{"--kubernetes", "--kube-worker-secret", "pace-worker-nats"}, nil, exitFailure, "connect to nats"},
		{"valid keys from env", []string{"--kubernetes"}, map[string]string{
			"PACE_KUBE_WORKER_SECRET": "pace-worker-nats", "PACE_KUBE_WORKER_SECRET_KEYS": "creds,ca.crt"}, exitFailure, "connect to nats"},
		{"without --kubernetes", []string{"--actuator", "local", "--kube-worker-secret", "pace-worker-nats"}, nil,
			exitUsage, "--pod-nats-url, --pod-redis-addr, --kube-worker-secret and --kube-worker-secret-keys need --kubernetes"},
		{"keys without secret", []string{"--kubernetes", "--kube-worker-secret-keys", "user,password"}, nil,
			exitUsage, "--kube-worker-secret-keys needs --kube-worker-secret"},
		{"bad name", []string{"--kubernetes", "--kube-worker-secret", "Pace_Worker"}, nil,
			exitUsage, `--kube-worker-secret: Invalid value: "Pace_Worker": a lowercase RFC 1123 subdomain`},
		{"bad name from env", []string{"--kubernetes"}, map[string]string{"PACE_KUBE_WORKER_SECRET": "-x"}, exitUsage,
			`--kube-worker-secret: Invalid value: "-x"`},
		{"unknown key", []string{"--kubernetes", "--kube-worker-secret", "w", "--kube-worker-secret-keys", "user,password,token"}, nil,
			exitUsage, `--kube-worker-secret-keys: Unsupported value: "token"`},
		{"password without user", []string{"--kubernetes", "--kube-worker-secret", "w", "--kube-worker-secret-keys", "password,ca.crt"}, nil,
			exitUsage, "--kube-worker-secret-keys: Invalid value: \"password,ca.crt\": user and password go together"},
		{"two ways to authenticate", []string{"--kubernetes", "--kube-worker-secret", "w", "--kube-worker-secret-keys", "creds,nkey"}, nil,
			exitUsage, "exclude each other"},
		{"empty pod URL", []string{"--kubernetes", "--nats", ""}, nil, exitUsage, "--pod-nats-url: Required value"},
		{"password in the pod URL", []string{"--kubernetes", "--pod-nats-url", "tls://pace-worker:" + secret + "@nats:4222"}, nil,
			exitUsage, "--pod-nats-url: Forbidden: must not carry credentials"},
		{"password in the URL pods default to", []string{"--kubernetes", "--nats", "nats://pace-gate:" + secret + "@" + closed[len("nats://"):]}, nil,
			exitUsage, "(it defaults to the URL local workers get)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(append([]string{}, gate...), tt.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.msg) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.msg)
			}
			if strings.Contains(stderr.String()+stdout.String(), secret) {
				t.Errorf("output shows the password:\n%s", stderr.String())
			}
		})
	}
}
