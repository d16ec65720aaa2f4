package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSubmitYAMLStringsAsWritten runs pace submit on YAML documents against
// a stand-in API that records what it is sent: strings as written (YAML
// 1.1 would send yes as true and 010 as 8), numbers by YAML 1.2, the
// target detected as the manager does, and a mapping where a string
// belongs refused before anything is sent.
func TestSubmitYAMLStringsAsWritten(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []byte
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"job_id":"job-1"}`)
	}))
	defer api.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "items.txt"), []byte("a\nyes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc string
		want      string // JSON sent; "" when refused
		stderr    string // in the refusal
	}{
		{"items, env and labels", `mode: batch
deadline: 1m
workload: {items: [x, yes, no, on, off, y, 010, 1.0, null, "~", 0x1F]}
worker: {env: {A: yes, B: 010}}
labels: {team: on}
replicas: {min: 1, max: 010}
`, `{"mode":"batch","deadline":"1m","workload":{"items":["x","yes","no","on","off","y","010","1.0","null","~","0x1F"]},
"worker":{"env":{"A":"yes","B":"010"}},"labels":{"team":"on"},"replicas":{"min":1,"max":10}}`, ""},
		{"workload file inlined", "name: off\ndeadline: 1m\nworkload: {file: items.txt}\nmax_deliveries: 12345678901234567890\n",
			`{"name":"off","deadline":"1m","workload":{"items":["a","yes"]},"max_deliveries":12345678901234567890}`, ""},
		{"asperathos", "plugin: kubejobs\nplugin_info: {cmd: [run, yes], env_vars: {A: 010}, init_size: 010}\n",
			`{"plugin":"kubejobs","plugin_info":{"cmd":["run","yes"],"env_vars":{"A":"010"},"init_size":10}}`, ""},
		{"JSON sent as it is", `{"mode": "batch", "workload": {"items": ["yes"]}, "deadline": 1e1}`,
			`{"mode": "batch", "workload": {"items": ["yes"]}, "deadline": 1e1}`, ""},
		{"mapping item", "mode: batch\ndeadline: 1m\nworkload: {items: [x, a: b]}\n", "",
			`spec.workload.items[1]: Invalid value: "a: b": must be a string: put it in quotes, e.g. "a: b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			sent = nil
			mu.Unlock()
			file := filepath.Join(dir, "job.yaml")
			if err := os.WriteFile(file, []byte(tt.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"submit", file, "--api", api.URL}, strings.NewReader(""), &stdout, &stderr)
			mu.Lock()
			defer mu.Unlock()
			if tt.want == "" {
				if code != exitRejected || !strings.Contains(stderr.String(), tt.stderr) || sent != nil {
					t.Errorf("exit %d, stderr %q, sent %s; want %d naming %s, nothing sent", code, stderr.String(), sent, exitRejected, tt.stderr)
				}
				return
			}
			if code != exitOK || strings.TrimSpace(stdout.String()) != "job-1" {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
			}
			if diff := cmp.Diff(decodeJSON(t, tt.want), decodeJSON(t, string(sent))); diff != "" {
				t.Errorf("sent %s\n(-want +got):\n%s", sent, diff)
			}
		})
	}
}

// TestDemoJobReadsAsWritten checks the demo spec converts as the manager
// converts it.
func TestDemoJobReadsAsWritten(t *testing.T) {
	t.Parallel()
	doc, err := demoJob()
	if err != nil {
		t.Fatal(err)
	}
	got := decodeJSON(t, string(doc)).(map[string]any)
	if got["deadline"] != "30s" || got["item_timeout"] != "10s" || len(got["workload"].(map[string]any)["items"].([]any)) != demoItems ||
		got["replicas"].(map[string]any)["max"] != json.Number("8") {
		t.Errorf("demo job = %s", doc)
	}
}

// decodeJSON decodes s with numbers as written.
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}
