package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func paceSim(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestSimCompareJSON checks the contract of pace sim compare -o json.
func TestSimCompareJSON(t *testing.T) {
	t.Parallel()
	out, errOut, code := paceSim(t, "sim", "compare", "--scenarios", "../../examples/scenarios", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Controllers map[string]map[string]float64 `json:"controllers"`
		Scenarios   []json.RawMessage             `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"default", "pid", "hpa", "deadline"} {
		c, ok := rep.Controllers[name]
		if !ok {
			t.Errorf("controller %s missing", name)
			continue
		}
		for _, k := range []string{"feasible_deadlines_met", "cost_vs_oracle", "scaling_actions"} {
			if _, ok := c[k]; !ok {
				t.Errorf("controllers.%s.%s missing", name, k)
			}
		}
	}
	if len(rep.Scenarios) < 12 {
		t.Errorf("%d scenarios, want >= 12", len(rep.Scenarios))
	}
}

func TestSimRunDeterministic(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "csv", "table"} {
		a, errOut, code := paceSim(t, "sim", "run", "../../examples/scenarios/10-failures.yaml", "-o", format)
		if code != exitOK {
			t.Fatalf("-o %s: exit %d: %s", format, code, errOut)
		}
		b, _, _ := paceSim(t, "sim", "run", "../../examples/scenarios/10-failures.yaml", "-o", format)
		if a != b || a == "" {
			t.Errorf("-o %s: two runs differ or are empty", format)
		}
	}
}

func TestSimUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"sim", "run"}, exitUsage},
		{[]string{"sim", "run", "x.yaml", "--controller", "bogus"}, exitUsage},
		{[]string{"sim", "run", "x.yaml", "-o", "xml"}, exitUsage},
		{[]string{"sim", "run", "does-not-exist.yaml"}, exitRejected},
		{[]string{"sim", "compare", "--scenarios", "does-not-exist"}, exitRejected},
	} {
		if _, _, code := paceSim(t, tc.args...); code != tc.want {
			t.Errorf("pace %s: exit %d, want %d", strings.Join(tc.args, " "), code, tc.want)
		}
	}
}
