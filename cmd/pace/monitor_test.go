package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/stages/sink/influx/influxtest"
)

// scrape returns the value of one sample line of pace up's /metrics, e.g.
// `pace_job_items_done{job="mon"}`, and whether it is present.
func scrape(t *testing.T, u *paceUp, series string) (string, bool) {
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
	db := influxtest.Start(t)
	u := startUp(t, t.TempDir(), "--influx-url", db.URL, "--influx-bucket", "pace/autogen", "--sample-interval", "200ms")
	var in strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&in, "%d\n", i)
	}
	u.pace(t, in.String(), "push", "mon")
	worker := startWorker(t, u, "mon", `read n; echo $((n*n))`, "-c", "2")

	bustest.Eventually(t, 30*time.Second, "pace_job_items_done 30 on /metrics", func() bool {
		v, ok := scrape(t, u, `pace_job_items_done{job="mon"}`)
		return ok && v == "30"
	})
	if v, ok := scrape(t, u, `pace_job_replicas{job="mon"}`); !ok || v != "1" {
		t.Errorf(`pace_job_replicas{job="mon"} = %q (present %t), want 1 worker`, v, ok)
	}
	if v, ok := scrape(t, u, `pace_job_backlog_items{job="mon"}`); !ok || v != "0" {
		t.Errorf(`pace_job_backlog_items{job="mon"} = %q (present %t), want 0`, v, ok)
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
