package manager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/auth"
	"github.com/pace-platform/pace/schemas"
)

// AsperathosPrefix is where the API is served in Asperathos' compatibility
// mode: an Asperathos client whose manager (and visualizer) URL is
// http://pace:8080/asperathos gets the answers Asperathos gave. Pace's own
// API at the root keeps Pace's: 404 for an unknown job, strict documents.
const AsperathosPrefix = "/asperathos"

// The compatibility mode differs from Pace's API in these answers
// (docs/api.md lists them, and the differences that remain):
//   - an unknown job is 400, not 404, and its errors are {} (200);
//   - errors are the list of the job's failed items as Asperathos' Redis
//     list rendered them (b'…' strings), {} when there are none;
//   - activating a cluster says "success";
//   - the job list carries each job's report fields;
//   - GET /visualizing/{id} answers {"url": …}, GET /healthz "OK";
//   - answers carry CORS headers (Config.AsperathosCORS);
//   - submissions are read leniently (relax, asperathosSpec).

// asperathosExtras are the routes only the compatibility mode serves: the
// visualizer's and the health check of Asperathos' services.
func (a *API) asperathosExtras() []route {
	return []route{
		{method: "GET", path: "/visualizing/{id}", summary: "URL of the job's dashboard, as Asperathos' visualizer answered", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				rec, err := a.m.Job(r.Context(), u, jobID(r))
				if err != nil {
					return nil, err
				}
				return map[string]string{"url": a.m.visualizerURL(rec)}, nil
			}},
		{method: "GET", path: "/healthz", summary: "Health, as Asperathos answered it", ok: http.StatusOK,
			handle: func(*http.Request, auth.User) (any, error) { return "OK", nil }},
	}
}

// cors sets the CORS headers of an Asperathos route's answer, as
// Asperathos' flask_cors did: any origin by default.
func (a *API) cors(w http.ResponseWriter) {
	origin := a.m.cfg.AsperathosCORS
	switch origin {
	case "none":
		return
	case "":
		origin = "*"
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	if origin != "*" {
		h.Add("Vary", "Origin")
	}
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
