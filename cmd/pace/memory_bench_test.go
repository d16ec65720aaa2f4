package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkQueueMemory submits a batch job of 1,000,000 items to pace up
// (no workers) and reports the process's resident size: its peak during the
// submission, and with the items queued a minute later, idle, with its
// live heap then. Run it once: go test -run '^$' -bench QueueMemory
// -benchtime 1x ./cmd/pace/
func BenchmarkQueueMemory(b *testing.B) {
	const items = 1_000_000
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "items.txt"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range items {
		fmt.Fprintf(w, "item-%d\n", i)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	_ = f.Close()
	u := startUp(b, filepath.Join(dir, "data"), "--actuator", "none", "--workload-dir", dir)
	pid := u.cmd.Process.Pid
	before := rss(b, pid)

	done, peaked := make(chan struct{}), make(chan int64)
	go func() {
		peak := before
		for {
			select {
			case <-done:
				peaked <- peak
				return
			case <-time.After(100 * time.Millisecond):
				peak = max(peak, rss(b, pid))
			}
		}
	}()
	b.ResetTimer()
	resp, err := http.Post(u.httpURL+"/submissions", "application/json",
		strings.NewReader(`{"deadline":"24h","workload":{"file":"items.txt"}}`))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		b.Fatalf("submit: %v %v", resp, err)
	}
	resp.Body.Close()
	b.StopTimer()
	close(done)
	peak := <-peaked
	time.Sleep(time.Minute)
	b.ReportMetric(float64(before)/(1<<20), "MB-rss-before")
	b.ReportMetric(float64(peak)/(1<<20), "MB-rss-peak")
	b.ReportMetric(float64(rss(b, pid))/(1<<20), "MB-rss-idle")
	b.ReportMetric(metric(b, u, "go_memstats_heap_alloc_bytes")/(1<<20), "MB-heap-idle")
}

// rss is the resident size of process pid, in bytes.
func rss(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.Fields(kb)[0], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// metric reads one unlabelled value of pace up's /metrics.
func metric(b *testing.B, u *paceUp, name string) float64 {
	v, ok := scrape(b, u, name)
	if !ok {
		b.Fatalf("no metric %s", name)
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
