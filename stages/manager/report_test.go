package manager_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

type summary struct {
	MaxError      [2]any  `json:"max_error"`
	MinError      [2]any  `json:"min_error"`
	FinalError    [2]any  `json:"final_error"`
	FinalReplicas int     `json:"final_replicas"`
	ExecutionTime int     `json:"execution_time"`
	Strategy      string  `json:"scaling_strategy"`
	DeadlineMet   *bool   `json:"deadline_met"`
	ItemsOK       int     `json:"items_ok"`
	ItemsDead     int     `json:"items_dead"`
	ReplicaSecs   float64 `json:"replica_seconds"`
	Source        string  `json:"source"`
}

type sample struct {
	JobProgress  float64 `json:"job_progress"`
	TimeProgress float64 `json:"time_progress"`
	Replicas     int     `json:"replicas"`
	Error        float64 `json:"error"`
}

// checkConsistent requires the summary's max, min and final errors to be
// entries of the detailed report with the same values, and to be its
// extremes and its last entry.
func checkConsistent(t *testing.T, s summary, d map[string]sample) {
	t.Helper()
	if len(d) == 0 {
		t.Fatal("empty detailed report")
	}
	var last string
	maxE, minE := -1e9, 1e9
	for k, v := range d {
		maxE, minE = max(maxE, v.Error), min(minE, v.Error)
		if k > last {
			last = k
		}
	}
	for name, entry := range map[string][2]any{"max_error": s.MaxError, "min_error": s.MinError, "final_error": s.FinalError} {
		key, _ := entry[1].(string)
		v, ok := d[key]
		if !ok || v.Error != entry[0] {
			t.Errorf("%s = %v, detailed[%q] = %+v (present %t)", name, entry, key, v, ok)
		}
	}
	if s.MaxError[0] != maxE || s.MinError[0] != minE || s.FinalError[1] != last {
		t.Errorf("summary %+v, want max %v min %v final at %s", s, maxE, minE, last)
	}
}

func TestReportFromMonitorSamples(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit("alice-token", `{"deadline":"100s","controller":{"name":"pid","params":{"heuristic_options":{"proportional_gain":0.1,"derivative_gain":0,"integral_gain":0.1}}},"workload":{"items":["a","b","c","d"]}}`)
	// The monitor publishes progress samples; the report is made of them.
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	samples := []schemas.Progress{
		{At: t0, JobProgress: 0, TimeProgress: 0, Error: 0, Replicas: 1},
		{At: t0.Add(2 * time.Second), JobProgress: 0.25, TimeProgress: 0.02, Error: 0.23, Replicas: 2},
		{At: t0.Add(4 * time.Second), JobProgress: 0.25, TimeProgress: 0.5, Error: -0.25, Replicas: 3},
		{At: t0.Add(6 * time.Second), JobProgress: 1, TimeProgress: 0.6, Error: 0.4, Replicas: 2},
		{At: t0.Add(8 * time.Second), JobProgress: 1, TimeProgress: 0.8, Error: 0.2, Replicas: 1},
	}
	for _, p := range samples {
		p.Job = id
		msg, err := bus.NewMsg(ctx, e.c.Prefix().Metrics(id, schemas.ProgressMetrics), &p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.JetStream().PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	var s summary
	e.do("GET", "/submissions/"+id+"/report/summary", "alice-token", "").json(t, &s)
	var d map[string]sample
	e.do("GET", "/submissions/"+id+"/report", "alice-token", "").json(t, &d)
	checkConsistent(t, s, d)
	if s.Source != "progress" || len(d) != 5 || s.MaxError[0] != 0.4 || s.MinError[0] != -0.25 || s.FinalError[0] != 0.2 ||
		s.FinalReplicas != 1 || s.ExecutionTime != 6 || s.Strategy != "pid" || s.ReplicaSecs != 16 {
		t.Errorf("summary = %+v (detailed %v)", s, d)
	}
	if got := d["2026-05-01T12:00:04Z"]; got != (sample{JobProgress: 0.25, TimeProgress: 0.5, Replicas: 3, Error: -0.25}) {
		t.Errorf("sample at 12:00:04 = %+v", got)
	}
}

func TestReportFromResults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", `{"deadline":"1h","workload":{"items":["a","b","c","d","e","f"]}}`)
	e.work(id, 2, upper)
	e.waitState(id, schemas.Completed)
	var s summary
	e.do("GET", "/submissions/"+id+"/report/summary", "alice-token", "").json(t, &s)
	var d map[string]sample
	e.do("GET", "/submissions/"+id+"/report", "alice-token", "").json(t, &d)
	checkConsistent(t, s, d)
	if s.Source != "results" || s.ItemsOK != 6 || s.ItemsDead != 0 || s.DeadlineMet == nil || !*s.DeadlineMet {
		t.Errorf("summary = %+v", s)
	}
	if s.Strategy != "deadline" { // the controller that ran a spec naming none
		t.Errorf("scaling_strategy %q, want deadline", s.Strategy)
	}
	var view struct{ Replicas int }
	e.do("GET", "/submissions/"+id, "alice-token", "").json(t, &view)
	if view.Replicas != 0 {
		t.Errorf("the completed job's view shows %d replicas, want 0: its workers are gone", view.Replicas)
	}
	var lastKey string
	for k := range d {
		lastKey = max(lastKey, k)
	}
	if d[lastKey].JobProgress != 1 {
		t.Errorf("last sample %s = %+v, want job progress 1", lastKey, d[lastKey])
	}
}

func TestLogFollowEndsWithTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", `{"mode":"streaming"}`)
	req, _ := http.NewRequest("GET", e.http.URL+"/submissions/"+id+"/log?follow=true", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("content type = %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("follow ended early: %v", lines.Err())
		}
		var l schemas.LogLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		return l.Line
	}
	if got := next(); !strings.HasPrefix(got, "created") {
		t.Errorf("first line = %q", got)
	}
	if got := next(); got != "started" {
		t.Errorf("second line = %q", got)
	}
	if r := e.do("PUT", "/submissions/"+id+"/terminate", "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatal(r.code)
	}
	if got := next(); !strings.HasPrefix(got, "terminated") {
		t.Errorf("third line = %q", got)
	}
	if lines.Scan() {
		t.Errorf("follow went on after the job ended: %s", lines.Text())
	}
}
