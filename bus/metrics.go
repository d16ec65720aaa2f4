package bus

import (
	"context"
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/prometheus/client_golang/prometheus"
)

// StreamCollector exports the state of Pace's streams and work consumers as
// Prometheus metrics, read from JetStream at each scrape.
type StreamCollector struct {
	c                                    *Client
	msgs, bytes, pending, acked, redeliv *prometheus.Desc
}

// NewStreamCollector returns a collector for c's streams; register it with a
// prometheus.Registerer.
func NewStreamCollector(c *Client) *StreamCollector {
	return &StreamCollector{
		c:     c,
		msgs:  prometheus.NewDesc("pace_stream_messages", "Messages stored in the stream.", []string{"stream"}, nil),
		bytes: prometheus.NewDesc("pace_stream_bytes", "Bytes stored in the stream.", []string{"stream"}, nil),
		pending: prometheus.NewDesc("pace_work_pending_items",
			"Items of the job waiting in its main queue.", []string{"job"}, nil),
		acked: prometheus.NewDesc("pace_work_processing_items",
			"Items of the job delivered to a worker and not yet finished.", []string{"job"}, nil),
		redeliv: prometheus.NewDesc("pace_work_redelivered_items",
			"Items of the job currently on a second or later delivery.", []string{"job"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *StreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.msgs, s.bytes, s.pending, s.acked, s.redeliv} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Streams it cannot read are skipped.
func (s *StreamCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	streams := s.c.js.ListStreams(ctx)
	for info := range streams.Info() {
		name := info.Config.Name
		ch <- prometheus.MustNewConstMetric(s.msgs, prometheus.GaugeValue, float64(info.State.Msgs), name)
		ch <- prometheus.MustNewConstMetric(s.bytes, prometheus.GaugeValue, float64(info.State.Bytes), name)
	}
	names, err := s.c.workStreamNames(ctx)
	if err != nil {
		return
	}
	for _, name := range names {
		work, err := s.c.js.Stream(ctx, name)
		if err != nil {
			continue
		}
		consumers := work.ListConsumers(ctx)
		for ci := range consumers.Info() {
			job, ok := schemas.WorkConsumerJob(ci.Name)
			if !ok {
				continue // the ledger's consumer
			}
			ch <- prometheus.MustNewConstMetric(s.pending, prometheus.GaugeValue, float64(ci.NumPending), job)
			ch <- prometheus.MustNewConstMetric(s.acked, prometheus.GaugeValue, float64(ci.NumAckPending), job)
			ch <- prometheus.MustNewConstMetric(s.redeliv, prometheus.GaugeValue, float64(ci.NumRedelivered), job)
		}
	}
}
