package visualizer_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/visualizer"
)

const job = `{"name":"render","deadline":"1m","workload":{"items":["a","b","c","d"]}}`

func TestPagesAreEmbeddedAndSelfContained(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, p := range []string{"/ui/", "/ui/jobs/anything", "/ui/static/app.js", "/ui/static/app.css"} {
		code, b := e.do("GET", p, "", "")
		if code != http.StatusOK || len(b) == 0 {
			t.Fatalf("GET %s = %d (%d bytes)", p, code, len(b))
		}
		// No CDN: every script and stylesheet is served by Pace itself.
		if m := regexp.MustCompile(`(?:src|href)="(https?:)?//`).Find(b); m != nil {
			t.Errorf("%s refers to an external resource: %s", p, m)
		}
	}
	_, page := e.do("GET", "/ui/", "", "")
	for _, want := range []string{`<label for="token">`, `name="viewport"`, `id="jobs"`, `id="stop"`, `lang="en"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index lacks %s", want)
		}
	}
}

func TestJobsListStreamsOnlyTheCallersJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", job)
	code, alice := e.events("/ui/events/jobs", "alice-token")
	if code != http.StatusOK {
		t.Fatalf("stream = %d", code)
	}
	rows := next(t, alice, "alice's list", func(rs []visualizer.JobRow) bool { return len(rs) == 1 })
	if r := rows[0]; r.ID != id || r.Owner != "alice" || r.State != schemas.Ongoing || r.Total != 4 || r.Deadline == nil {
		t.Errorf("row = %+v, want alice's ongoing job of 4 with a deadline", r)
	}
	_, bob := e.events("/ui/events/jobs", "bob-token")
	next(t, bob, "bob's list", func(rs []visualizer.JobRow) bool { return len(rs) == 0 })

	// A new job shows up on the open stream.
	id2 := e.submit("alice-token", job)
	next(t, alice, "second job", func(rs []visualizer.JobRow) bool { return len(rs) == 2 && rs[0].ID == id2 })

	if code, _ := e.events("/ui/events/jobs", "wrong-token"); code != http.StatusUnauthorized {
		t.Errorf("bad token: stream = %d, want 401", code)
	}
}

func TestJobPageStreamsChartsAndStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", job)
	if code, _ := e.events("/ui/events/jobs/"+id, "bob-token"); code != http.StatusNotFound && code != http.StatusForbidden {
		t.Errorf("bob on alice's job: %d, want 403 or 404", code)
	}
	code, ch := e.events("/ui/events/jobs/"+id, "alice-token")
	if code != http.StatusOK {
		t.Fatalf("stream = %d", code)
	}
	v := next(t, ch, "first view", func(*visualizer.JobView) bool { return true })
	if v.ID != id || v.Pending != 4 || !strings.Contains(v.ProgressSVG, "no samples yet") {
		t.Errorf("first view = %+v, want 4 pending and no samples", v.JobRow)
	}
	start := time.Now()
	for i := range 3 {
		e.progress(&schemas.Progress{Job: id, At: start.Add(time.Duration(i) * time.Second), JobProgress: float64(i) / 4,
			TimeProgress: float64(i) / 60, Replicas: i + 1, Throughput: 0.5, Error: float64(i)/4 - float64(i)/60})
		want := `data-points="` + string(rune('1'+i)) + `"`
		v = next(t, ch, "chart with "+want, func(v *visualizer.JobView) bool { return strings.Contains(v.ProgressSVG, want) })
	}
	if !strings.Contains(v.ReplicasSVG, `id="replicas-chart"`) || !strings.Contains(v.ProgressSVG, "<polyline") || v.Latest.Replicas != 3 {
		t.Errorf("charts: %s / %s, latest %+v", v.ProgressSVG, v.ReplicasSVG, v.Latest)
	}

	code, b := e.do("GET", "/submissions/"+id+"/visualizer", "alice-token", "")
	if code != http.StatusOK || !strings.Contains(string(b), e.http.URL+visualizer.JobURL(id)) {
		t.Errorf("visualizer = %d %s, want the job page %s", code, b, visualizer.JobURL(id))
	}

	if code, b := e.do("PUT", "/submissions/"+id+"/stop", "alice-token", ""); code != http.StatusNoContent {
		t.Fatalf("stop = %d %s", code, b)
	}
	v = next(t, ch, "stopped", func(v *visualizer.JobView) bool { return v.Final })
	if v.State != schemas.Stopped {
		t.Errorf("state = %s, want stopped", v.State)
	}
	if !slices.ContainsFunc(v.Decisions, func(d visualizer.Decision) bool {
		return d.Type == schemas.EventStopping && strings.Contains(d.Reason, "alice")
	}) {
		t.Errorf("decisions = %+v, want alice's stop with its reason", v.Decisions)
	}

}
