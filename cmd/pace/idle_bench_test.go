package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkIdleJobs creates 1,000 jobs on pace up (without an actuator, so
// no worker runs) that have nothing to do — a third streaming with
// replicas.min 0, a third streaming with min 1, a third batch jobs whose
// items wait for workers — lets them settle, then reports the CPU the pace
// process spends over 60 s (percent of one core) and its resident size.
// Run it once: go test -run '^$' -bench IdleJobs -benchtime 1x ./cmd/pace/
func BenchmarkIdleJobs(b *testing.B) {
	const jobs = 1000
	u := startUp(b, filepath.Join(b.TempDir(), "data"), "--actuator", "none")
	docs := []string{
		`{"mode":"streaming","worker":{"exec":"cat"},"replicas":{"min":0,"max":2}}`,
		`{"mode":"streaming","worker":{"exec":"cat"},"replicas":{"min":1,"max":2}}`,
		`{"deadline":"24h","worker":{"exec":"cat"},"workload":{"items":["a","b","c"]}}`,
	}
	for i := range jobs {
		resp, err := http.Post(u.httpURL+"/submissions", "application/json", strings.NewReader(docs[i%len(docs)]))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("job %d: %s", i, resp.Status)
		}
	}
	pid := u.cmd.Process.Pid
	time.Sleep(70 * time.Second) // first samples and decisions; idle jobs settle to their heartbeat
	b.ResetTimer()
	start, t0 := cpuTicks(b, pid), time.Now()
	// A quiet job's sample and check come every 5 minutes on a phase set by
	// its id (internal/heartbeat), so any minute holds a fifth of them;
	// a job whose workers hold its items is sampled at least every 1 % of
	// the time left to its deadline, and checked every 30 s while its stall
	// clock runs.
	time.Sleep(60 * time.Second)
	used, elapsed := cpuTicks(b, pid)-start, time.Since(t0)
	b.StopTimer()
	// /proc/<pid>/stat counts in clock ticks of 1/100 s (USER_HZ).
	b.ReportMetric(float64(used)/100/elapsed.Seconds()*100, "%-of-a-core")
	b.ReportMetric(float64(rss(b, pid))/(1<<20), "MB-rss")
}

// cpuTicks is the user and system time of process pid, in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command is in parentheses and may hold spaces: fields count from after it.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("stat of %d: %v %v", pid, err1, err2)
	}
	return utime + stime
}
