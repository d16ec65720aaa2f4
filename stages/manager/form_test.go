package manager_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestFormContentTypeJSONBody sends bodies as curl -d does without -H
// (application/x-www-form-urlencoded): JSON is read as JSON, anything else
// is refused with 415 saying which content type to send.
func TestFormContentTypeJSONBody(t *testing.T) {
	t.Parallel()
	const form = "application/x-www-form-urlencoded"
	e := newEnv(t)
	id := e.submit("alice-token", `{"mode":"streaming"}`)
	tests := []struct {
		name, method, path, token, ct, body string
		code                                int
	}{
		{"submit JSON as form", "POST", "/submissions", "alice-token", form, `{"mode":"streaming"}`, http.StatusAccepted},
		{"submit JSON as form with charset", "POST", "/submissions", "alice-token", form + "; charset=utf-8", `{"mode":"streaming"}`, http.StatusAccepted},
		{"stop with JSON credentials as form", "PUT", "/submissions/" + id + "/stop", "alice-token", form, `{"enable_auth": false}`, http.StatusNoContent},
		{"register plugin as form", "POST", "/plugins", "root-token", form, `{"plugin_name":"my-mpc","component":"controller"}`, http.StatusOK},
		{"stop with a form body", "PUT", "/submissions/" + id + "/stop", "alice-token", form, `enable_auth=false`, http.StatusUnsupportedMediaType},
		{"submit a form body", "POST", "/submissions", "alice-token", form, `mode=streaming`, http.StatusUnsupportedMediaType},
		{"submit YAML as form", "POST", "/submissions", "alice-token", form, "mode: streaming\n", http.StatusUnsupportedMediaType},
		{"plain text still refused", "POST", "/plugins", "root-token", "text/plain", `{"plugin_name":"x","component":"controller"}`, http.StatusUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.doCT(tt.method, tt.path, tt.token, tt.body, tt.ct)
			if r.code != tt.code {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, r.code, r.body, tt.code)
			}
			if tt.code != http.StatusUnsupportedMediaType {
				return
			}
			if msg := r.apiError(t).Message; !strings.Contains(msg, "application/json") {
				t.Errorf("message = %q, want it to say to send application/json", msg)
			}
			if msg := r.apiError(t).Message; tt.ct == form && !strings.Contains(msg, "Content-Type: application/json") {
				t.Errorf("message = %q, want it to name the header to send", msg)
			}
		})
	}
}
