package manager

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// The fuzz targets below call parse, the manager's whole check of a
// submitted document (strict decoding, the Asperathos mapping, defaults,
// validation, plugin and cluster lookups on a real bus, the workload), and
// check that a document is refused with field errors naming paths of its
// own format, or accepted as a valid spec that reads back unchanged.

// fuzzNow is the manager's clock in the fuzz targets.
var fuzzNow = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// FuzzParsePace feeds parse with native job specs, as JSON or YAML.
func FuzzParsePace(f *testing.F) {
	m := fuzzManager(f)
	f.Fuzz(func(t *testing.T, doc []byte, asYAML bool) {
		ct := "application/json"
		if asYAML {
			ct = "application/yaml"
		}
		checkParse(t, m, doc, ct)
	})
}

// FuzzParseAsperathos feeds parse with Asperathos kubejobs submissions.
func FuzzParseAsperathos(f *testing.F) {
	m := fuzzManager(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkParse(t, m, doc, "application/json")
	})
}

// fuzzManager is a manager on a real embedded bus whose workload downloads
// all answer two lines, without a network.
func fuzzManager(f *testing.F) *Stage {
	c := bustest.Client(f, bustest.Server(f))
	workloads := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{"Content-Type": {"text/plain"}},
			Body: io.NopCloser(strings.NewReader("item-1\nitem-2\n"))}, nil
	})}
	m, err := New(Deps{Bus: c}, Config{Open: true}, WithClock(clocktesting.NewFakeClock(fuzzNow)), WithHTTPClient(workloads))
	if err != nil {
		f.Fatal(err)
	}
	return m
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Field paths at the top of each format's documents; "body" is the whole one.
var (
	paceRoots       = []string{"body", "spec"}
	asperathosRoots = []string{"body", "plugin", "plugin_info", "enable_auth", "username", "password"}
)

func checkParse(t *testing.T, m *Stage, doc []byte, ct string) {
	ctx := context.Background()
	who := m.callerOf(auth.AnonymousUser()) // an admin: the API is open
	top := topLevel(doc, ct)
	asperathos := top["plugin"] != nil || top["plugin_info"] != nil
	sub, err := m.parse(ctx, who, doc, ct, false)
	if err != nil {
		var apiErr *schemas.APIError
		switch {
		case !errors.As(err, &apiErr):
			t.Fatalf("error is not an API error: %T %v", err, err)
		case apiErr.Code == http.StatusUnauthorized && asperathos:
			return // enable_auth with a username this manager does not know
		case apiErr.Code != http.StatusBadRequest || len(apiErr.Details) == 0:
			t.Fatalf("refused without field errors: %v", apiErr)
		}
		roots := paceRoots
		if asperathos {
			roots = asperathosRoots
		}
		for _, d := range apiErr.Details {
			_, unknownTopField := top[d.Field]
			if root, _, _ := strings.Cut(d.Field, "."); !unknownTopField && !slices.Contains(roots, strings.Split(root, "[")[0]) {
				t.Fatalf("field error %q: %s, not a path of the document (roots %v)", d.Field, d.Detail, roots)
			}
		}
		return
	}
	if errs := sub.spec.Validate(); len(errs) > 0 {
		t.Fatalf("accepted an invalid spec: %v", errs)
	}
	if asperathos {
		checkAsperathosSeconds(t, top, sub.spec)
	} else {
		checkSecondsKept(t, top, sub.spec)
	}
	out, err := json.Marshal(sub.spec)
	if err != nil {
		t.Fatalf("encode the accepted spec: %v", err)
	}
	back, err := m.parse(ctx, who, out, "application/json", false)
	if err != nil {
		t.Fatalf("the accepted spec, re-encoded, is refused: %v\n%s", err, out)
	}
	if diff := cmp.Diff(sub.spec, back.spec, specEquality); diff != "" {
		t.Fatalf("round trip through %s changed the spec (-accepted +read back):\n%s", out, diff)
	}
	if !slices.Equal(sub.items, back.items) {
		t.Fatalf("round trip changed the items: %q, then %q", sub.items, back.items)
	}
}

// specEquality compares specs as the stages read them: empty and absent
// alike, controller params by JSON value.
var specEquality = cmp.Options{
	cmpopts.EquateEmpty(),
	cmp.Transformer("params", func(s schemas.ControllerSpec) any {
		var v any
		_ = json.Unmarshal(s.Params, &v)
		return struct {
			Name          string
			CheckInterval schemas.Duration
			Params        any
		}{s.Name, s.CheckInterval, v}
	}),
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
}

// topLevel returns the fields of a JSON or YAML object document, or nil;
// YAML is read as the manager reads it.
func topLevel(doc []byte, ct string) map[string]json.RawMessage {
	if ct == "application/yaml" {
		j, errs := yamlJSON(doc)
		if len(errs) > 0 {
			return nil
		}
		doc = j
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(doc, &top)
	return top
}

// checkAsperathosSeconds fails t unless every Asperathos setting in seconds
// became the same duration in the spec (no overflow).
func checkAsperathosSeconds(t *testing.T, top map[string]json.RawMessage, spec schemas.JobSpec) {
	t.Helper()
	var pi pluginInfo
	if err := json.Unmarshal(top["plugin_info"], &pi); err != nil {
		t.Fatalf("accepted plugin_info does not decode: %v", err)
	}
	seconds := func(name string, n *int, got schemas.Duration) {
		if n != nil && (got.D()%time.Second != 0 || int64(got.D()/time.Second) != int64(*n)) {
			t.Fatalf("%s %d seconds became %v", name, *n, got.D())
		}
	}
	seconds("monitor_info.expected_time", pi.MonitorInfo.ExpectedTime, spec.Deadline.After)
	if c := pi.ControlParameters; c != nil {
		seconds("control_parameters.check_interval", c.CheckInterval, spec.Controller.CheckInterval)
	}
	seconds("job_resources_lifetime", pi.JobResourcesLifetime, spec.ResourcesLifetime)
	seconds("termination_grace_period_seconds", pi.TerminationGracePeriodSeconds, spec.Worker.TerminationGrace)
}

// checkSecondsKept fails t unless every top-level duration of a native
// spec given as a number of seconds became that duration (not, say, the
// default, which 0 selects).
func checkSecondsKept(t *testing.T, top map[string]json.RawMessage, spec schemas.JobSpec) {
	t.Helper()
	for name, got := range map[string]schemas.Duration{"item_timeout": spec.ItemTimeout, "resources_lifetime": spec.ResourcesLifetime} {
		var seconds float64
		if json.Unmarshal(top[name], &seconds) != nil || seconds == 0 {
			continue
		}
		if want := seconds * float64(time.Second); math.Abs(float64(got)-want) >= 1 {
			t.Fatalf("%s: %v seconds became %v", name, seconds, got.D())
		}
	}
}
