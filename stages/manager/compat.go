package manager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// AsperathosPrefix is where the API is served in Asperathos' compatibility
// mode: an Asperathos client whose manager (and visualizer) URL is
// http://pace:8080/asperathos gets the answers Asperathos gave. Pace's own
// API at the root keeps Pace's: 404 for an unknown job, strict documents.
const AsperathosPrefix = "/asperathos"

// The compatibility mode differs from Pace's API in these answers
// (docs/api.md lists them, and docs/asperathos.md the differences that
// remain):
//   - an unknown job is 400, not 404, and its errors are {} (200); a
//     caller without credentials on an API that needs them gets 401;
//   - errors are the list of the job's failed items as Asperathos' Redis
//     list rendered them (b'…' strings), {} when there are none;
//   - the log is {"execution", "stderr", "stdout"}, plugins are listed in
//     Asperathos' rows and a refused plugin is "Error installing plugin";
//   - activating a cluster says "success";
//   - the job list carries each job's report fields;
//   - the monitor's, controller's and visualizer's own routes are served
//     (components.go), GET /healthz answers "OK", GET /key an empty key;
//   - answers carry CORS headers (Config.AsperathosCORS);
//   - submissions are read leniently (relax, asperathosSpec).

// asperathosExtras are the routes only the compatibility mode serves: the
// health check and key of Asperathos' manager, and the routes of its
// other services (components).
func (a *API) asperathosExtras() []route {
	return append([]route{
		{method: "GET", path: "/healthz", summary: "Health, as Asperathos answered it", ok: http.StatusOK,
			handle: func(*http.Request, auth.User) (any, error) { return "OK", nil }},
		{method: "GET", path: "/key", summary: "The manager's SSH public key: Pace has none", ok: http.StatusOK,
			handle: func(*http.Request, auth.User) (any, error) {
				return map[string]string{"key": "", "message": noKey}, nil
			}},
	}, a.components()...)
}

// noKey says why GET /key answers an empty key.
const noKey = "Pace has no SSH key: it reaches clusters with kubeconfigs (POST /submissions/cluster), never over SSH"

// CORS of the Asperathos routes: the methods they serve, and the answer
// headers a script in a browser may read (Asperathos exposed
// Authorization; Pace adds what it answers with).
var (
	corsMethods = []string{"GET", "POST", "PUT", "DELETE", "OPTIONS"}
	corsExposed = strings.Join([]string{"Authorization", "Retry-After", "WWW-Authenticate",
		apfhttp.HeaderFlowSchemaUID, apfhttp.HeaderPriorityLevelUID}, ", ")
)

// cors sets the CORS headers of an Asperathos route's answer, as
// Asperathos' flask_cors did: any origin by default. It reports whether
// CORS is on.
func (a *API) cors(w http.ResponseWriter) bool {
	origin := a.m.cfg.AsperathosCORS
	switch origin {
	case "none":
		return false
	case "":
		origin = "*"
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExposed)
	if origin != "*" {
		h.Add("Vary", "Origin")
	}
	return true
}

// preflight answers a CORS preflight of an Asperathos route: the method
// asked for when the routes serve it (else every method they serve), and
// the headers asked for, as flask_cors reflected them.
func (a *API) preflight(w http.ResponseWriter, r *http.Request) {
	if a.cors(w) {
		h := w.Header()
		methods := strings.Join(corsMethods, ", ")
		if m := r.Header.Get("Access-Control-Request-Method"); slices.Contains(corsMethods, m) {
			methods = m
		}
		h.Set("Access-Control-Allow-Methods", methods)
		headers := r.Header.Get("Access-Control-Request-Headers")
		if headers == "" {
			headers = "Authorization, Content-Type"
		}
		h.Set("Access-Control-Allow-Headers", headers)
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
	}
	w.WriteHeader(http.StatusNoContent)
}

// asperathosLog is a job's log in the shape of Asperathos' GET
// /submissions/{id}/log, three texts of one line per log line, each
// starting with its time (RFC 3339): execution is what Pace wrote about the
// job (its events, warnings, dropped output: sources "manager" and
// "pace"); stdout is what its workers wrote, "<worker>: <line>" (a
// worker's two streams arrive merged); stderr is what the Redis front
// recorded: the errors its workers pushed to <q>:errors, commands it does
// not serve (source "redis-front").
func asperathosLog(lines []*schemas.LogLine) map[string]string {
	var execution, stdout, stderr strings.Builder
	for _, l := range lines {
		at := l.At.UTC().Format(time.RFC3339Nano)
		switch l.Source {
		case "manager", "pace":
			fmt.Fprintf(&execution, "%s %s\n", at, l.Line)
		case "redis-front":
			fmt.Fprintf(&stderr, "%s %s\n", at, l.Line)
		default:
			fmt.Fprintf(&stdout, "%s %s: %s\n", at, l.Source, l.Line)
		}
	}
	return map[string]string{"execution": execution.String(), "stdout": stdout.String(), "stderr": stderr.String()}
}

// asperathosPlugin is a row of Asperathos' GET /plugins: a plugin's name,
// how it was installed (source: Pace's are "builtin" or "external"), from
// where (plugin_source, as registered), its module (for Pace, the stage
// that runs it) and the Asperathos component it belongs to.
type asperathosPlugin struct {
	Name         string `json:"name"`
	Source       string `json:"source"`
	PluginSource string `json:"plugin_source"`
	Module       string `json:"module"`
	Component    string `json:"component"`
}

// asperathosServed are the Asperathos plugins a submission may name, as
// Asperathos seeded them, with the stage of Pace that does their work.
var asperathosServed = []asperathosPlugin{
	{Name: "kubejobs", Component: "manager", Module: "stages/manager"},
	{Name: "kubejobs", Component: "controller", Module: "stages/controller"},
	{Name: "kubejobs", Component: "monitor", Module: "stages/collector"},
	{Name: "kubejobs_cost", Component: "monitor", Module: "stages/collector"},
	{Name: "k8s-grafana", Component: "visualizer", Module: "stages/visualizer"},
}

// asperathosPlugins lists plugins as Asperathos' GET /plugins did: the
// Asperathos plugins Pace serves, then Pace's own (ps), each under the
// stage that runs it (none for an external controller).
func asperathosPlugins(ps []Plugin) []asperathosPlugin {
	out := make([]asperathosPlugin, 0, len(asperathosServed)+len(ps))
	for _, p := range asperathosServed {
		p.Source = "builtin"
		out = append(out, p)
	}
	for _, p := range ps {
		row := asperathosPlugin{Name: p.Name, Source: p.Source, PluginSource: p.PluginSource, Component: p.Component}
		if p.Source == "builtin" { // an external controller is a program of its own
			row.Module = "stages/" + p.Component
		}
		out = append(out, row)
	}
	return out
}

// installError is a refused POST /plugins in the compatibility mode:
// Asperathos' {"message": "Error installing plugin"} beside Pace's error
// envelope, which says why.
type installError struct{ *schemas.APIError }

func (e installError) Unwrap() error { return e.APIError }

// MarshalJSON writes the envelope with Asperathos' message.
func (e installError) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Message string `json:"message"`
		*schemas.APIError
	}{"Error installing plugin", e.APIError})
}

// asperathosErrors renders a job's dead letters as Asperathos' GET
// /submissions/{id}/errors did its Redis list job:errors: one b'…' string
// per entry (the error a worker pushed, else the item), {} when empty.
func asperathosErrors(dead []*schemas.DeadLetter) any {
	if len(dead) == 0 {
		return map[string]any{}
	}
	out := make([]string, len(dead))
	for i, d := range dead {
		v := d.LastError
		if v == "" {
			v = d.Payload
		}
		out[i] = pyBytes(v)
	}
	return out
}

// pyBytes is Python's repr of s as bytes: b'…', with \ and ' escaped and
// bytes outside printable ASCII as \xNN.
func pyBytes(s string) string {
	var b strings.Builder
	b.WriteString("b'")
	for i := range len(s) {
		switch c := s[i]; {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// relaxDoc reads an Asperathos document as Asperathos did: fields it does
// not know are dropped, numbers sent as strings read as numbers, a
// fractional number where an integer belongs rounded, a number where a
// string belongs read as its text. It returns the document to decode and a
// warning for each change that loses something (the job's log keeps them).
func relaxDoc(doc []byte, t reflect.Type) ([]byte, []string) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return doc, nil // the strict decoding reports it
	}
	var warnings []string
	v = relax(v, t, nil, &warnings)
	out, err := json.Marshal(v)
	if err != nil {
		return doc, nil
	}
	return out, warnings
}

func relax(v any, t reflect.Type, p *field.Path, warnings *[]string) any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface {
		return v
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return v
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			f, ok := fields[k]
			if !ok {
				*warnings = append(*warnings, fmt.Sprintf("%s: unknown field, ignored", pathOf(p, k)))
				delete(obj, k)
				continue
			}
			obj[k] = relax(obj[k], f.Type, p.Child(k), warnings)
		}
	case reflect.Map:
		if obj, ok := v.(map[string]any); ok {
			for k, e := range obj {
				obj[k] = relax(e, t.Elem(), p.Key(k), warnings)
			}
		}
	case reflect.Slice:
		if arr, ok := v.([]any); ok {
			for i, e := range arr {
				arr[i] = relax(e, t.Elem(), p.Index(i), warnings)
			}
		}
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Float32:
		n, ok := number(v)
		if !ok {
			return v
		}
		if k := t.Kind(); k == reflect.Float64 || k == reflect.Float32 {
			return n
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1<<53 {
			return n // the strict decoding reports it
		}
		if f != math.Trunc(f) {
			*warnings = append(*warnings, fmt.Sprintf("%s: %s rounded to %d", pathOf(p, ""), n, int64(math.Round(f))))
		}
		return json.Number(strconv.FormatInt(int64(math.Round(f)), 10))
	case reflect.String:
		if n, ok := v.(json.Number); ok {
			return n.String()
		}
	}
	return v
}

// number reads a JSON number, or a string holding one.
func number(v any) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		return x, true
	case string:
		s := strings.TrimSpace(x)
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return json.Number(s), true
		}
	}
	return "", false
}

func pathOf(p *field.Path, k string) string {
	if k != "" {
		p = p.Child(k)
	}
	if p == nil {
		return "body"
	}
	return p.String()
}
