package influx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/sink"
	"github.com/pace-platform/pace/stages/sink/influx"
	"github.com/pace-platform/pace/stages/sink/influx/influxtest"
)

var _ sink.Sink = (*influx.Sink)(nil)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func progress(job string, i int) *schemas.Progress {
	eta := schemas.Duration(time.Duration(100-i) * time.Second)
	return &schemas.Progress{Job: job, At: t0.Add(time.Duration(i) * 300 * time.Millisecond), Mode: schemas.Batch,
		State: schemas.Ongoing, JobProgress: float64(i) / 100, TimeProgress: float64(i) / 50, Error: -float64(i) / 100,
		Replicas: i%3 + 1, Total: 100, Done: i, Throughput: 3.5, PerReplica: 1.75, ETA: &eta, QueueLength: 100 - i}
}

func runSink(t *testing.T, cfg influx.Config) *influx.Sink {
	t.Helper()
	s, err := influx.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return s
}

// TestRoundTrip writes progress through the sink into a real InfluxDB 1.8
// and reads Asperathos' four measurements back with InfluxQL.
func TestRoundTrip(t *testing.T) {
	db := influxtest.Start(t)
	s := runSink(t, influx.Config{URL: db.URL, Bucket: "pace/autogen", FlushInterval: 50 * time.Millisecond})
	const n = 5 // 300ms apart: several share a second, as Asperathos' points could not
	for i := range n {
		s.Write(progress("j1", i))
	}
	bustest.Eventually(t, 20*time.Second, "20 points written", func() bool { return s.Stats().Written.Load() == 4*n })
	for _, m := range []string{influx.JobProgress, influx.TimeProgress, influx.JobParallelism, influx.ProgressError} {
		if got := db.Count(m, "j1"); got != n {
			t.Errorf("count(%s) = %d, want %d", m, got, n)
		}
	}
	rows := db.Query(`SELECT "value", "done", "eta_seconds" FROM "job_progress" WHERE "job" = 'j1' ORDER BY time DESC LIMIT 1`)
	if len(rows) != 1 {
		t.Fatalf("last job_progress rows = %v", rows)
	}
	wantTime := progress("j1", n-1).At.UnixNano()
	if got, _ := rows[0][0].(json.Number).Int64(); got != wantTime {
		t.Errorf("time = %d, want %d (nanosecond precision)", got, wantTime)
	}
	for i, want := range []string{"0.04", "4", "96"} {
		if got := rows[0][i+1].(json.Number).String(); got != want {
			t.Errorf("field %d = %s, want %s", i+1, got, want)
		}
	}
	rows = db.Query(`SELECT "value" FROM "application_progress_error" WHERE "job" = 'j1' ORDER BY time DESC LIMIT 1`)
	if got := rows[0][1].(json.Number).String(); got != "-0.04" {
		t.Errorf("application_progress_error = %s, want -0.04", got)
	}
	rows = db.Query(`SELECT "value" FROM "job_parallelism" WHERE "job" = 'j1' ORDER BY time DESC LIMIT 1`)
	if got := rows[0][1].(json.Number).String(); got != "2" {
		t.Errorf("job_parallelism = %s, want 2", got)
	}
	if d := s.Stats().Dropped(); d != 0 {
		t.Errorf("dropped = %d, want 0", d)
	}

	// A job controlled by its cost: kubejobs_cost's measurements, read back.
	desired := 1.5
	cost := progress("c1", 1)
	cost.CostRate, cost.Spent, cost.DesiredCost, cost.Error = 4, 0.25, &desired, 2.5
	s.Write(cost)
	bustest.Eventually(t, 20*time.Second, "the cost job's 6 points written", func() bool { return s.Stats().Written.Load() == 4*n+6 })
	for m, want := range map[string]string{influx.CurrentSpent: "4", influx.DesiredCost: "1.5", influx.CostError: "2.5", influx.JobParallelism: "2"} {
		rows := db.Query(`SELECT "value" FROM "` + m + `" WHERE "job" = 'c1'`)
		if len(rows) != 1 || rows[0][1].(json.Number).String() != want {
			t.Errorf("%s = %v, want %s", m, rows, want)
		}
	}
}

// TestOutageRecovery stops InfluxDB while progress keeps coming, checks the
// sink never blocks, then starts InfluxDB again and checks every point arrives.
func TestOutageRecovery(t *testing.T) {
	db := influxtest.Start(t)
	s := runSink(t, influx.Config{URL: db.URL, Bucket: "pace", FlushInterval: 20 * time.Millisecond, BatchSize: 8,
		RetryInterval: 50 * time.Millisecond, MaxRetryInterval: 200 * time.Millisecond, Timeout: time.Second, MaxRetries: 50})
	i := 0
	write := func() {
		t.Helper()
		start := time.Now()
		s.Write(progress("j2", i))
		i++
		// Write only queues; a write waiting on InfluxDB would wait out the
		// outage. 10s is far from both, so a slow machine cannot fail it.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Write blocked for %s", d)
		}
	}
	for range 5 {
		write()
	}
	bustest.Eventually(t, 20*time.Second, "points before the outage", func() bool { return s.Stats().Written.Load() == 20 })

	db.Stop()
	for range 5 {
		write()
	}
	bustest.Eventually(t, 20*time.Second, "a failed write during the outage", func() bool {
		return s.Stats().FailedRequests.Load() > 0
	})
	if got := s.Stats().Written.Load(); got != 20 {
		t.Fatalf("written during the outage: %d points, want still 20", got)
	}

	db.Start()
	// Retries ride on new writes, as in a live pipeline.
	bustest.Eventually(t, 30*time.Second, "every point written after recovery", func() bool {
		write()
		time.Sleep(50 * time.Millisecond)
		return s.Stats().Written.Load() == int64(4*i)
	})
	if got := db.Count(influx.JobProgress, "j2"); got != i {
		t.Errorf("job_progress points in InfluxDB = %d, want %d", got, i)
	}
	if d := s.Stats().Dropped(); d != 0 {
		t.Errorf("dropped = %d, want 0", d)
	}
}

// TestBufferBound fills the bounded buffer of a sink that is not running:
// Write never blocks, the overflow is counted, and it is logged at most once
// per 10 s of the sink's clock.
func TestBufferBound(t *testing.T) {
	var logs bytes.Buffer
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := influx.New(influx.Config{URL: "http://127.0.0.1:1", Bucket: "pace", Buffer: 5},
		influx.WithClock(clk), influx.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		s.Write(progress("j3", i))
	}
	if got := s.Stats().BufferFull.Load(); got != 3*4 {
		t.Errorf("points dropped on a full buffer = %d, want 12", got)
	}
	clk.SetTime(clk.Now().Add(11 * time.Second))
	s.Write(progress("j3", 8))
	if n := strings.Count(logs.String(), "buffer full"); n != 2 {
		t.Errorf("%d buffer-full warnings for 4 overflows 11 s apart, want 2 (one per 10 s):\n%s", n, logs.String())
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  influx.Config
		want int
	}{
		{"ok", influx.Config{URL: "http://localhost:8086", Bucket: "pace/autogen"}, 0},
		{"no scheme", influx.Config{URL: "localhost:8086", Bucket: "b"}, 1},
		{"no bucket", influx.Config{URL: "https://influx.example"}, 1},
		{"negative buffer", influx.Config{URL: "http://h", Bucket: "b", Buffer: -1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if errs := tt.cfg.Defaults().Validate(); len(errs) != tt.want {
				t.Errorf("Validate() = %v, want %d errors", errs, tt.want)
			}
		})
	}
}
