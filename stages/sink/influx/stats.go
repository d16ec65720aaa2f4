package influx

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats count the sink's points by outcome. Queued points are handed to the
// client; each ends Written, Rejected (InfluxDB refused the request, 4xx),
// RetriesExhausted, or stays Unconfirmed (buffered, or evicted from the
// client's full retry buffer). BufferFull points never reached the client.
type Stats struct {
	Queued, Written, Rejected, RetriesExhausted, BufferFull atomic.Int64
	// FailedRequests are write requests that will be retried; Errors are
	// errors from the client's error channel.
	FailedRequests, Errors atomic.Int64
}

// Dropped is every point counted as lost.
func (s *Stats) Dropped() int64 {
	return s.BufferFull.Load() + s.Rejected.Load() + s.RetriesExhausted.Load()
}

// Unconfirmed is Queued minus every point with a known outcome.
func (s *Stats) Unconfirmed() int64 {
	return s.Queued.Load() - s.Written.Load() - s.Rejected.Load() - s.RetriesExhausted.Load()
}

var (
	pointsDesc = prometheus.NewDesc("pace_monitor_influx_points_total",
		"Points of the InfluxDB sink by outcome: queued (handed to the client), written (acknowledged by InfluxDB).",
		[]string{"outcome"}, nil)
	droppedDesc = prometheus.NewDesc("pace_monitor_influx_points_dropped_total",
		"Points of the InfluxDB sink dropped, by reason: buffer_full, rejected (4xx), retries_exhausted.",
		[]string{"reason"}, nil)
	unconfirmedDesc = prometheus.NewDesc("pace_monitor_influx_points_unconfirmed",
		"Points handed to the client without a known outcome: buffered, being retried, or evicted from its retry buffer.", nil, nil)
	failedDesc = prometheus.NewDesc("pace_monitor_influx_failed_requests_total",
		"Write requests that failed and will be retried (InfluxDB down, slow or overloaded).", nil, nil)
	errorsDesc = prometheus.NewDesc("pace_monitor_influx_write_errors_total",
		"Errors reported on the client's error channel.", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Stats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pointsDesc, droppedDesc, unconfirmedDesc, failedDesc, errorsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *Stats) Collect(ch chan<- prometheus.Metric) {
	c := func(d *prometheus.Desc, v *atomic.Int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v.Load()), labels...)
	}
	c(pointsDesc, &s.Queued, "queued")
	c(pointsDesc, &s.Written, "written")
	c(droppedDesc, &s.BufferFull, "buffer_full")
	c(droppedDesc, &s.Rejected, "rejected")
	c(droppedDesc, &s.RetriesExhausted, "retries_exhausted")
	c(failedDesc, &s.FailedRequests)
	c(errorsDesc, &s.Errors)
	ch <- prometheus.MustNewConstMetric(unconfirmedDesc, prometheus.GaugeValue, float64(s.Unconfirmed()))
}

// countingTransport counts the points of each write request by outcome.
type countingTransport struct {
	base  http.RoundTripper
	stats *Stats
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/write") || req.Body == nil {
		return t.base.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	lines := int64(countLines(string(body)))
	resp, err := t.base.RoundTrip(req)
	switch {
	case err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		t.stats.FailedRequests.Add(1)
	case resp.StatusCode < 300:
		t.stats.Written.Add(lines)
	default:
		t.stats.Rejected.Add(lines)
	}
	return resp, err
}

func countLines(batch string) int { return strings.Count(batch, "\n") }
