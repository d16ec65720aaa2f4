package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/stages/sink/influx/influxtest"
)

// scrape returns the value of one sample line of pace up's /metrics, e.g.
// `pace_job_items_done{job="mon"}`, and whether it is present.
func scrape(t testing.TB, u *paceUp, series string) (string, bool) {
	t.Helper()
	resp, err := http.Get(u.httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), series+" "); ok {
			return v, true
		}
	}
	return "", false
}

// TestMonitorEndToEnd runs a job with pace up and a real InfluxDB: its
// progress shows on /metrics and in InfluxDB (issue 6, "done when").
func TestMonitorEndToEnd(t *testing.T) {
	t.Parallel()
	db := influxtest.Start(t)
	u := startUp(t, t.TempDir(), "--influx-url", db.URL, "--influx-bucket", "pace/autogen", "--sample-interval", "200ms")
	var in strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&in, "%d\n", i)
	}
	u.pace(t, in.String(), "push", "mon")
	worker := startWorker(t, u, "mon", `read n; echo $((n*n))`, "-c", "2")

	// A result is stored before its item is acknowledged: a sample may see
	// both for a moment, so wait for the queue to be empty too.
	bustest.Eventually(t, 30*time.Second, "pace_job_items_done 30 and an empty backlog on /metrics", func() bool {
		done, ok1 := scrape(t, u, `pace_job_items_done{job="mon"}`)
		backlog, ok2 := scrape(t, u, `pace_job_backlog_items{job="mon"}`)
		return ok1 && ok2 && done == "30" && backlog == "0"
	})
	if v, ok := scrape(t, u, `pace_job_replicas{job="mon"}`); !ok || v != "1" {
		t.Errorf(`pace_job_replicas{job="mon"} = %q (present %t), want 1 worker`, v, ok)
	}
	bustest.Eventually(t, 30*time.Second, "InfluxDB job_progress of mon with done = 30", func() bool {
		rows := db.Query(`SELECT last("done") FROM "job_progress" WHERE "job" = 'mon'`)
		return len(rows) == 1 && rows[0][1].(json.Number).String() == "30"
	})
	for _, m := range []string{"job_progress", "time_progress", "job_parallelism", "application_progress_error"} {
		if n := db.Count(m, "mon"); n == 0 {
			t.Errorf("no %s points for job mon in InfluxDB", m)
		}
	}
	if v, ok := scrape(t, u, `pace_monitor_influx_points_dropped_total{reason="buffer_full"}`); !ok || v != "0" {
		t.Errorf("influx buffer_full drops = %q (present %t), want 0", v, ok)
	}
	stopWorker(t, worker)
	u.stop(t)
}

// TestMonitorBatchJob submits a batch job with a deadline to pace up's API
// and follows Asperathos' metrics of it to completion on /metrics and in
// InfluxDB: job progress 1, time progress between 0 and 1, error = their
// difference (positive: the job finished early).
func TestMonitorBatchJob(t *testing.T) {
	t.Parallel()
	db := influxtest.Start(t)
	u := startUp(t, t.TempDir(), "--influx-url", db.URL, "--influx-bucket", "pace", "--sample-interval", "200ms")
	items := make([]string, 20)
	for i := range items {
		items[i] = fmt.Sprint(i + 1)
	}
	doc, _ := json.Marshal(map[string]any{"name": "mon", "mode": "batch", "deadline": "120s",
		"workload": map[string]any{"items": items}, "worker": map[string]any{"exec": `read n; echo $((n*n))`},
		"replicas": map[string]any{"min": 1, "max": 2, "initial": 1}})
	resp, err := http.Post(u.httpURL+"/submissions", "application/json", strings.NewReader(string(doc)))
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		JobID string `json:"job_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || created.JobID == "" {
		t.Fatalf("submit: status %d, %v", resp.StatusCode, err)
	}
	job := created.JobID
	bustest.Eventually(t, 60*time.Second, "pace_job_progress_ratio 1 on /metrics", func() bool {
		v, ok := scrape(t, u, `pace_job_progress_ratio{job="`+job+`"}`)
		return ok && v == "1"
	})
	tp, ok := scrape(t, u, `pace_job_time_progress_ratio{job="`+job+`"}`)
	if f, err := strconv.ParseFloat(tp, 64); !ok || err != nil || f <= 0 || f >= 1 {
		t.Errorf("time progress = %q (present %t), want in (0, 1)", tp, ok)
	}
	if v, ok := scrape(t, u, `pace_job_items_total{job="`+job+`"}`); !ok || v != "20" {
		t.Errorf("items total = %q (present %t), want 20", v, ok)
	}
	var jp, tpi, e float64
	bustest.Eventually(t, 30*time.Second, "last points of the job in InfluxDB", func() bool {
		last := func(m string) (float64, bool) {
			rows := db.Query(`SELECT last("value") FROM "` + m + `" WHERE "job" = '` + job + `'`)
			if len(rows) != 1 {
				return 0, false
			}
			f, err := rows[0][1].(json.Number).Float64()
			return f, err == nil
		}
		var ok1, ok2, ok3 bool
		jp, ok1 = last("job_progress")
		tpi, ok2 = last("time_progress")
		e, ok3 = last("application_progress_error")
		return ok1 && ok2 && ok3 && jp == 1
	})
	if tpi <= 0 || tpi >= 1 || math.Abs(e-(jp-tpi)) > 1e-6 {
		t.Errorf("InfluxDB last job_progress %v, time_progress %v, error %v: want error = job - time progress, time in (0, 1)", jp, tpi, e)
	}
	u.stop(t)
}
