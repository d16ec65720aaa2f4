// Package influx writes progress to InfluxDB (1.8+ and 2.x) through
// influxdb-client-go's non-blocking write API, with Asperathos' measurement
// names (see Points).
//
// Nothing here blocks the pipeline. Write puts a progress message in a
// bounded queue (Config.Buffer) or drops it, counted, when the queue is
// full. One goroutine encodes queued messages into the client, which
// batches them (BatchSize, FlushInterval) and retries failed batches with
// exponential backoff and jitter (RetryInterval doubling up to
// MaxRetryInterval, at most MaxRetries times, in a retry buffer of
// Buffer×4 points). The client's error channel is taken before the first
// write and drained (G3.2 in reference/infra.md). An HTTP transport
// wrapper counts the points each write request carried by outcome, so
// "written" is what InfluxDB acknowledged, not what was attempted.
package influx

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	ihttp "github.com/influxdata/influxdb-client-go/v2/api/http"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/schemas"
)

// Sink writes progress to InfluxDB. Create it with New, run it with Run.
type Sink struct {
	cfg    Config
	clk    clock.PassiveClock
	log    *slog.Logger
	client influxdb2.Client
	write  api.WriteAPI
	errs   <-chan error
	queue  chan *schemas.Progress
	stats  *Stats
	warned atomic.Int64 // unix nanos of the last drop or error warning
}

// Option configures a Sink.
type Option func(*Sink)

// WithClock sets the clock that spaces warnings (default: the real one).
func WithClock(clk clock.PassiveClock) Option { return func(s *Sink) { s.clk = clk } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Sink) { s.log = l } }

// New returns an InfluxDB sink; Run connects (and checks health).
func New(cfg Config, opts ...Option) (*Sink, error) {
	cfg = cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("influx sink config: %w", errs.ToAggregate())
	}
	s := &Sink{cfg: cfg, clk: clock.RealClock{}, log: slog.New(slog.DiscardHandler),
		queue: make(chan *schemas.Progress, cfg.Buffer), stats: &Stats{}}
	for _, opt := range opts {
		opt(s)
	}
	s.log = s.log.With("stage", "sink", "sink", "influx", "url", cfg.URL, "bucket", cfg.Bucket)
	return s, nil
}

// open makes the client and its write API, whose goroutines run until
// close: a sink that is never run starts none.
func (s *Sink) open() {
	ms := func(d time.Duration) uint { return uint(d / time.Millisecond) }
	hc := &http.Client{Timeout: s.cfg.Timeout, Transport: &countingTransport{base: http.DefaultTransport, stats: s.stats}}
	clientOpts := influxdb2.DefaultOptions().
		SetHTTPClient(hc).
		SetBatchSize(uint(s.cfg.BatchSize)).
		SetFlushInterval(ms(s.cfg.FlushInterval)).
		SetRetryInterval(ms(s.cfg.RetryInterval)).
		SetMaxRetryInterval(ms(s.cfg.MaxRetryInterval)).
		SetExponentialBase(2).
		SetMaxRetries(uint(s.cfg.MaxRetries + 1)). // the callback below gives up first, and counts
		SetMaxRetryTime(ms(time.Hour)).
		SetRetryBufferLimit(uint(s.cfg.Buffer * pointsPerMessage)).
		SetApplicationName("pace").
		SetLogLevel(0) // the client's own log: errors only (G3.4)
	s.client = influxdb2.NewClientWithOptions(s.cfg.URL, s.cfg.Token, clientOpts)
	s.write = s.client.WriteAPI(s.cfg.Org, s.cfg.Bucket)
	s.errs = s.write.Errors() // before any write, or errors are lost (G3.2)
	s.write.SetWriteFailedCallback(func(batch string, err ihttp.Error, attempts uint) bool {
		if attempts+1 >= uint(s.cfg.MaxRetries) {
			s.stats.RetriesExhausted.Add(int64(countLines(batch)))
			s.warn("influxdb write retries exhausted, points dropped", "points", countLines(batch), "err", err.Error())
			return false
		}
		return true
	})
}

// Stats returns the sink's counters.
func (s *Sink) Stats() *Stats { return s.stats }

// Write implements sink.Sink: it never blocks.
func (s *Sink) Write(p *schemas.Progress) {
	select {
	case s.queue <- p:
	default:
		s.stats.BufferFull.Add(pointsPerMessage)
		s.warn("influxdb sink buffer full, points dropped", "buffer", s.cfg.Buffer)
	}
}

// Forget implements sink.Sink; InfluxDB keeps a deleted job's history.
func (s *Sink) Forget(string) {}

// warn logs at most one warning per 10 seconds.
func (s *Sink) warn(msg string, args ...any) {
	now := s.clk.Now().UnixNano()
	last := s.warned.Load()
	if now-last < int64(10*time.Second) || !s.warned.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn(msg, args...)
}

// Run checks InfluxDB's health, then writes queued progress until ctx ends,
// and flushes within Timeout. An unreachable InfluxDB is only logged: points
// wait in the buffers and writing resumes when it is back.
func (s *Sink) Run(ctx context.Context) error {
	s.open()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for err := range s.errs {
			s.stats.Errors.Add(1)
			s.warn("influxdb write failed", "err", err)
		}
	}()
	hctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	h, err := s.client.Health(hctx)
	cancel()
	switch {
	case err != nil:
		s.log.Warn("influxdb not reachable yet; buffering", "err", err)
	case h.Status != "pass":
		s.log.Warn("influxdb unhealthy; buffering", "status", h.Status)
	default:
		version := ""
		if h.Version != nil {
			version = *h.Version
		}
		s.log.Info("influxdb sink started", "version", version)
	}
	for {
		select {
		case p := <-s.queue:
			s.encode(p)
		case <-ctx.Done():
			for len(s.queue) > 0 {
				s.encode(<-s.queue)
			}
			s.close()
			<-drained
			return nil
		}
	}
}

func (s *Sink) encode(p *schemas.Progress) {
	points := Points(p)
	for _, pt := range points {
		s.write.WritePoint(pt)
	}
	s.stats.Queued.Add(int64(len(points)))
}

// close flushes and closes the client, giving up after two Timeouts.
func (s *Sink) close() {
	done := make(chan struct{})
	go func() {
		s.client.Close()
		close(done)
	}()
	t := time.NewTimer(2 * s.cfg.Timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("influxdb sink closed with points unflushed", "unconfirmed", s.stats.Unconfirmed())
	}
}
