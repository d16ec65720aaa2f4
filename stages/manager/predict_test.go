package manager_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// submitted is the 202 answer of a native submission.
type submitted struct {
	JobID      string              `json:"job_id"`
	Prediction *schemas.Prediction `json:"prediction"`
}

func TestPredictionAtAdmission(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	items := `"workload":{"items":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 100), ",") + `]`
	doc := func(deadline, rest string) string {
		return `{"name":"p","mode":"batch","deadline":"` + deadline + `",` + items + rest + `,"replicas":{"min":1,"max":10}}`
	}

	// A hint: 100 items of 1 s on 10 replicas take 10 rounds after the start-up.
	var ok submitted
	r := e.do("POST", "/submissions", "alice-token", doc("20s", `,"item_time":"1s"}`))
	if r.code != http.StatusAccepted {
		t.Fatalf("submit = %d %s", r.code, r.body)
	}
	r.json(t, &ok)
	p := ok.Prediction
	if p == nil || p.Basis != schemas.BasisHint || p.Feasible == nil || !*p.Feasible || p.ETA.D() != 11*time.Second ||
		p.ReplicasNeeded != 6 { // 19 s after a 1 s start-up: 19 items a replica
		t.Errorf("prediction %+v, want feasible in 11s with 6 replicas needed", p)
	}
	v := e.status("alice-token", ok.JobID)
	if v["confidence"] != "medium" || v["prediction"] == nil {
		t.Errorf("job view: confidence %v, prediction %v", v["confidence"], v["prediction"])
	}

	// Infeasible and rejected: refused before anything is stored.
	count := func() int {
		var list map[string]any
		e.do("GET", "/submissions", "alice-token", "").json(t, &list)
		return len(list)
	}
	before := count()
	r = e.do("POST", "/submissions", "alice-token", doc("5s", `,"item_time":"1s"},"deadline_policy":"reject"`))
	if e := r.apiError(t); r.code != http.StatusUnprocessableEntity || e.Name != "DeadlineInfeasible" ||
		!strings.Contains(e.Message, "needs 25 replicas") {
		t.Errorf("reject = %d %+v, want 422 DeadlineInfeasible needing 25 replicas", r.code, e)
	}
	if after := count(); after != before {
		t.Errorf("a refused job was stored: %d jobs, then %d", before, after)
	}

	// Infeasible and warned: accepted, with the warning in its log.
	r = e.do("POST", "/submissions", "alice-token", doc("5s", `,"item_time":"1s"}`))
	var warned submitted
	r.json(t, &warned)
	if r.code != http.StatusAccepted || warned.Prediction.Feasible == nil || *warned.Prediction.Feasible {
		t.Fatalf("warn = %d %s", r.code, r.body)
	}
	var lines []schemas.LogLine
	e.do("GET", "/submissions/"+warned.JobID+"/log", "alice-token", "").json(t, &lines)
	if !strings.Contains(logText(lines), "warning: deadline 5s cannot be met") {
		t.Errorf("log %q, want the infeasible deadline's warning", logText(lines))
	}

	// No hint and no history: no forecast.
	var none submitted
	e.do("POST", "/submissions", "alice-token", doc("20s", `}`)).json(t, &none)
	if p := none.Prediction; p == nil || p.Basis != schemas.BasisNone || p.Feasible != nil {
		t.Errorf("without a basis: %+v", p)
	}
}

// A job's item times are learned when it completes: the next job of the
// same program is predicted from them.
func TestPredictionLearnsFromFinishedJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := `{"name":"l","mode":"batch","deadline":"10m","workload":{"items":["a","b","c","d"]},` +
		`"worker":{"command":["render","--fast"]},"replicas":{"min":1,"max":2}}`
	first := e.submit("alice-token", spec)
	e.work(first, 1, func(context.Context, *schemas.WorkItem) (string, error) {
		time.Sleep(50 * time.Millisecond)
		return "ok", nil
	})
	e.waitState(first, schemas.Completed)
	var next submitted
	e.do("POST", "/submissions", "alice-token", spec).json(t, &next)
	p := next.Prediction
	if p == nil || p.Basis != schemas.BasisHistory || p.Samples != 4 || p.ItemTime.D() < 50*time.Millisecond || p.ItemTime.D() > time.Second {
		t.Fatalf("after one job: %+v, want basis history from its 4 items of about 50ms", p)
	}
	other := strings.Replace(spec, "--fast", "--slow", 1) // another program: no history
	e.do("POST", "/submissions", "alice-token", other).json(t, &next)
	if next.Prediction.Basis != schemas.BasisNone {
		t.Errorf("another program: %+v", next.Prediction)
	}
}

func logText(lines []schemas.LogLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Line + "\n")
	}
	return b.String()
}
