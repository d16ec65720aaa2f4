package manager_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/schemas"
)

// TestRequestsAreAnsweredWithFieldErrors sends malformed requests to every
// route that reads a body or a path value: none crashes or answers 5xx,
// and a refused one names the field that is wrong.
func TestRequestsAreAnsweredWithFieldErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	long := strings.Repeat("x", 300)
	tests := []struct {
		name, method, path, body string
		code                     int
		field                    string // "" when the error names no field
	}{
		{"cluster not JSON", "POST", "/submissions/cluster", `{"cluster_name":`, 400, "body"},
		{"cluster mistyped name", "POST", "/submissions/cluster", `{"cluster_name":5,"cluster_config":"x"}`, 400, "cluster_name"},
		{"cluster unknown field", "POST", "/submissions/cluster", `{"cluster_name":"a","cluster_config":"x","colour":1}`, 400, "colour"},
		{"cluster without config", "POST", "/submissions/cluster", `{"cluster_name":"a"}`, 400, "cluster_config"},
		{"cluster without name", "POST", "/submissions/cluster", `{"cluster_config":"x"}`, 400, "cluster_name"},
		{"cluster bad name", "POST", "/submissions/cluster", `{"cluster_name":"a.b","cluster_config":"x"}`, 400, "cluster_name"},
		{"cluster long name", "POST", "/submissions/cluster", `{"cluster_name":"` + long + `","cluster_config":"x"}`, 400, "cluster_name"},
		{"cluster list body", "POST", "/submissions/cluster", `[1]`, 400, "body"},
		{"certificate without name", "POST", "/submissions/cluster/a/certificate", `{"certificate_content":"x"}`, 400, "certificate_name"},
		{"certificate mistyped", "POST", "/submissions/cluster/a/certificate", `{"certificate_name":"c","certificate_content":7}`, 400, "certificate_content"},
		{"activate bad name", "PUT", "/submissions/cluster/a.b/activate", ``, 400, "name"},
		{"delete bad cluster name", "DELETE", "/submissions/cluster/a.b", ``, 400, "name"},
		{"plugin not JSON", "POST", "/plugins", `{`, 400, "body"},
		{"plugin mistyped", "POST", "/plugins", `{"plugin_name":["x"],"component":"controller"}`, 400, "plugin_name"},
		{"plugin unknown field", "POST", "/plugins", `{"plugin_name":"x","component":"controller","extra":1}`, 400, "extra"},
		{"plugin bad name", "POST", "/plugins", `{"plugin_name":"a b","component":"controller"}`, 400, "plugin_name"},
		{"plugin bad component", "POST", "/plugins", `{"plugin_name":"x","component":"toaster"}`, 400, "component"},
		{"stop credentials mistyped", "PUT", "/submissions/nope/stop", `{"enable_auth":"yes"}`, 400, "enable_auth"},
		{"stop body a list", "PUT", "/submissions/nope/stop", `[]`, 400, "body"},
		{"stop bad job id", "PUT", "/submissions/a.b/stop", ``, 404, ""},
		{"delete all mistyped", "DELETE", "/submissions", `{"username":1}`, 400, "username"},
		{"job id too long", "GET", "/submissions/" + long, ``, 404, ""},
		{"report of unknown job", "GET", "/submissions/nope/report", ``, 404, ""},
		{"log follow of unknown job", "GET", "/submissions/nope/log?follow=true", ``, 404, ""},
		{"log follow not a boolean", "GET", "/submissions/nope/log?follow=maybe", ``, 400, "follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, "root-token", tt.body)
			if r.code >= 500 || r.code != tt.code {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, r.code, r.body, tt.code)
			}
			if r.code == http.StatusNoContent {
				return
			}
			apiErr := r.apiError(t)
			var fields []string
			for _, d := range apiErr.Details {
				fields = append(fields, d.Field)
			}
			if tt.field != "" && (len(fields) == 0 || fields[0] != tt.field) {
				t.Errorf("fields = %v, want %s (%s)", fields, tt.field, r.body)
			}
		})
	}
}

// TestNATSRequestsAreAnsweredWithFieldErrors does the same over NATS:
// every malformed request gets the error envelope naming the field.
func TestNATSRequestsAreAnsweredWithFieldErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.c.Prefix()
	tests := []struct {
		name, subject, body string
		header              map[string]string
		code                int
		field               string
	}{
		{"stop without body", p.Control("stop"), ``, nil, 400, "job_id"},
		{"stop not JSON", p.Control("stop"), `{"job_id":`, nil, 400, "body"},
		{"stop mistyped id", p.Control("stop"), `{"job_id":5}`, nil, 400, "job_id"},
		{"stop unknown field", p.Control("terminate"), `{"job_id":"x","force":true}`, nil, 400, "force"},
		{"stop empty id", p.Control("terminate"), `{"job_id":""}`, nil, 400, "job_id"},
		{"stop a list", p.Control("stop"), `["x"]`, nil, 400, "body"},
		{"stop unknown job", p.Control("stop"), `{"job_id":"nope"}`, nil, 404, ""},
		{"submit nothing", p.Submit(), ``, nil, 400, "body"},
		{"submit invalid UTF-8", p.Submit(), "\xff\xfe", nil, 400, "body"},
		{"submit bad YAML", p.Submit(), "mode: [", map[string]string{"Content-Type": "application/yaml"}, 400, "body"},
		{"submit unknown content type", p.Submit(), `{}`, map[string]string{"Content-Type": "text/plain"}, 415, ""},
		{"submit tiny timeout", p.Submit(), `{"mode":"streaming","item_timeout":1e-10}`, nil, 400, "spec.item_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := nats.NewMsg(tt.subject)
			msg.Data = []byte(tt.body)
			msg.Header.Set("Authorization", "Bearer root-token")
			for k, v := range tt.header {
				msg.Header.Set(k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			reply, err := e.c.Conn().RequestMsgWithContext(ctx, msg)
			if err != nil {
				t.Fatal(err)
			}
			var apiErr schemas.APIError
			if err := json.Unmarshal(reply.Data, &apiErr); err != nil || apiErr.Code != tt.code {
				t.Fatalf("reply %s (%v), want error_code %d", reply.Data, err, tt.code)
			}
			if tt.field != "" && (len(apiErr.Details) == 0 || apiErr.Details[0].Field != tt.field) {
				t.Errorf("details = %+v, want field %s first", apiErr.Details, tt.field)
			}
		})
	}
}
