package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestNATSAuthFlags(t *testing.T) {
	const secret = "hunter2-Secret"
	closed := "nats://" + freeAddr(t)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		msg  string
	}{
		{"two ways", []string{"--nats-creds", "a.creds", "--nats-user", "u", "--nats-password", secret}, nil,
			exitUsage, "exclude each other"},
		{"user without password", []string{"--nats-user", "u"}, nil, exitUsage, "user and password go together"},
		{"password without user", nil, map[string]string{"PACE_NATS_PASSWORD": secret}, exitUsage, "user and password go together"},
		{"missing nkey", []string{"--nats-nkey", "/does/not/exist.nk"}, nil, exitUsage, "nkey seed file /does/not/exist.nk"},
		{"password from env", []string{"--nats-user", "u"}, map[string]string{"PACE_NATS_PASSWORD": secret},
			exitFailure, "connect to nats"},
		{"password in URL", []string{"--nats", strings.Replace(closed, "nats://", "nats://u:"+secret+"@", 1)}, nil,
			exitFailure, "u:xxxxx@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := append([]string{"results", "j", "--nats", closed, "--connect-timeout", "200ms", "--log-format", "text"}, tt.args...)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
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
