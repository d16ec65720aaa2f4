package sink_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/collector"
	"github.com/pace-platform/pace/stages/processor"
	"github.com/pace-platform/pace/stages/sink"
	"github.com/pace-platform/pace/stages/sink/influx"
	"github.com/pace-platform/pace/stages/sink/influx/influxtest"
	"github.com/pace-platform/pace/stages/sink/prom"
)

// counting is a sink that counts what it receives.
type counting struct{ n atomic.Int64 }

func (c *counting) Write(*schemas.Progress) { c.n.Add(1) }
func (c *counting) Forget(string)           {}

// openJobs opens n streaming jobs, each with 3 items queued and one result.
func openJobs(b *testing.B, c *bus.Client, prefix string, n int) {
	b.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("%s-%04d", prefix, i)
		if err := c.PushItems(ctx, id, bus.Items("a", "b", "c")); err != nil {
			b.Fatal(err)
		}
		if err := c.PublishResult(ctx, &schemas.Result{Job: id, ItemID: "r1", Output: "ok"}); err != nil {
			b.Fatal(err)
		}
	}
}

// pipeline runs collector, processor and the given sinks until the returned stop.
func pipeline(b *testing.B, c *bus.Client, cfg collector.Config, sinks map[string]sink.Sink, runs ...func(context.Context) error) (*collector.Stage, func()) {
	b.Helper()
	col, err := collector.New(collector.Deps{Bus: c}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	proc, err := processor.New(processor.Deps{Bus: c}, processor.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	runs = append(runs, col.Run, proc.Run)
	for name, s := range sinks {
		st, err := sink.New(sink.Deps{Bus: c, Sink: s}, sink.Config{Name: name, Start: sink.Durable})
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, st.Run)
	}
	for _, run := range runs {
		g.Go(func() error { return run(gctx) })
	}
	return col, func() {
		cancel()
		if err := g.Wait(); err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkPipelineThroughput drives 1,000 running jobs through collector →
// processor → sinks (Prometheus, a real InfluxDB, and a counter) with
// back-to-back collector rounds, and reports samples/s at each end.
func BenchmarkPipelineThroughput(b *testing.B) {
	db := influxtest.Start(b)
	c := bustest.Client(b, bustest.Server(b))
	const jobs = 1000
	openJobs(b, c, "tp", jobs)
	is, err := influx.New(influx.Config{URL: db.URL, Bucket: "pace"})
	if err != nil {
		b.Fatal(err)
	}
	got := &counting{}
	// Wait for the processor's and sinks' consumers before timing.
	_, stop := pipeline(b, c, collector.Config{Interval: 10 * time.Millisecond, ActivityGap: -1},
		map[string]sink.Sink{"count": got, "prom": prom.New(prom.Config{}), "influx": is}, is.Run)
	time.Sleep(2 * time.Second)
	const window = 10 * time.Second
	start, n0, w0 := time.Now(), got.n.Load(), is.Stats().Written.Load()
	time.Sleep(window)
	n, w := got.n.Load()-n0, is.Stats().Written.Load()-w0
	el := time.Since(start).Seconds()
	stop()
	b.ReportMetric(float64(n)/el, "progress/s")
	b.ReportMetric(float64(w)/el, "influx-points/s")
	b.ReportMetric(float64(is.Stats().Dropped()), "influx-dropped")
}

// BenchmarkLatency measures the time from a queue change (a result stored
// and its item acknowledged) to the job's progress message showing it, with
// 999 other running jobs sampled every second, with and without activity
// sampling.
func BenchmarkLatency(b *testing.B) {
	for _, tc := range []struct {
		idle int
		gap  time.Duration
	}{{0, 0}, {999, 0}, {999, -1}} {
		name := fmt.Sprintf("idle=%d/activity=on", tc.idle)
		if tc.gap < 0 {
			name = fmt.Sprintf("idle=%d/activity=off", tc.idle)
		}
		gap := tc.gap
		b.Run(name, func(b *testing.B) {
			c := bustest.Client(b, bustest.Server(b))
			openJobs(b, c, "idle", tc.idle) // + the probe: nats-server allows 1,000 consumers per stream by default
			ctx := context.Background()
			const items = 30
			payloads := make([]string, items)
			if err := c.PushItems(ctx, "probe", bus.Items(payloads...)); err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			seen := map[int]time.Time{}
			sub, err := c.Conn().Subscribe(c.Prefix().Metrics("probe", schemas.ProgressMetrics), func(m *nats.Msg) {
				p, err := bus.Decode[schemas.Progress](m.Data, m.Header)
				if err != nil {
					return
				}
				mu.Lock()
				if _, ok := seen[p.Done]; !ok {
					seen[p.Done] = time.Now()
				}
				mu.Unlock()
			})
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Unsubscribe() //nolint:errcheck
			_, stop := pipeline(b, c, collector.Config{Interval: time.Second, ActivityGap: gap}, nil)
			defer stop()
			work, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamWork), "work-probe")
			if err != nil {
				b.Fatal(err)
			}
			time.Sleep(2 * time.Second) // first rounds create the counting consumers
			var lat []time.Duration
			rng := rand.New(rand.NewPCG(1, 2))
			for done := 1; done <= items; done++ {
				// Changes come at random phases of the collector's tickers.
				time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
				batch, err := work.Fetch(1)
				if err != nil {
					b.Fatal(err)
				}
				for m := range batch.Messages() {
					it, _ := bus.Decode[schemas.WorkItem](m.Data(), m.Headers())
					changed := time.Now()
					if err := c.PublishResult(ctx, &schemas.Result{Job: "probe", ItemID: it.ID}); err != nil {
						b.Fatal(err)
					}
					_ = m.DoubleAck(ctx)
					var at time.Time
					bustest.Eventually(b, 5*time.Second, "progress showing the result", func() bool {
						mu.Lock()
						defer mu.Unlock()
						at = seen[done]
						return !at.IsZero()
					})
					lat = append(lat, at.Sub(changed))
				}
			}
			slices.Sort(lat)
			q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.95), "p95-ms")
			b.ReportMetric(q(1), "max-ms")
		})
	}
}
