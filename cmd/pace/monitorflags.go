package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/stages/collector"
	"github.com/pace-platform/pace/stages/processor"
	"github.com/pace-platform/pace/stages/sink"
	"github.com/pace-platform/pace/stages/sink/influx"
	"github.com/pace-platform/pace/stages/sink/prom"
)

// monitorFlags configure the monitor pipeline of 'pace up': collector,
// processor and sinks (docs/monitoring.md).
type monitorFlags struct {
	interval  time.Duration
	retention time.Duration
	maxBytes  byteSize
	influx    influx.Config
}

func (m *monitorFlags) add(fs *pflag.FlagSet) {
	fs.DurationVar(&m.interval, "sample-interval", time.Second, "how often every running job is sampled (also on job events and queue activity)")
	fs.DurationVar(&m.retention, "metrics-retention", 7*24*time.Hour, "how long progress (and decisions) stay in the bus: the history read without InfluxDB")
	fs.Var(&m.maxBytes, "metrics-max-bytes", "bound of the metrics stream, oldest first, e.g. 2GiB (default a quarter of --max-store)")
	fs.StringVar(&m.influx.URL, "influx-url", "", `InfluxDB URL, e.g. http://localhost:8086 ("" = no InfluxDB)`)
	fs.StringVar(&m.influx.Bucket, "influx-bucket", "pace", `InfluxDB 2.x bucket, or "db" / "db/rp" on 1.8`)
	fs.StringVar(&m.influx.Token, "influx-token", "", `InfluxDB 2.x token, or "user:password" on 1.8 with auth`)
	fs.StringVar(&m.influx.Org, "influx-org", "", "InfluxDB 2.x organization (ignored by 1.8)")
}

func (m *monitorFlags) validate() error {
	if m.interval < 10*time.Millisecond {
		return usageError("--sample-interval %s: must be at least 10ms", m.interval)
	}
	if m.retention < time.Minute {
		return usageError("--metrics-retention %s: must be at least 1m", m.retention)
	}
	if m.influx.URL != "" {
		if errs := m.influx.Defaults().Validate(); len(errs) > 0 {
			return usageError("--influx-*: %v", errs.ToAggregate())
		}
	}
	return nil
}

// limits are the bus retention settings the flags ask for; the metrics
// stream takes a quarter of maxStore unless --metrics-max-bytes says otherwise.
func (m *monitorFlags) limits(maxStore int64) bus.Limits {
	maxBytes := int64(m.maxBytes)
	if maxBytes == 0 {
		maxBytes = maxStore / 4
	}
	return bus.Limits{MetricsMaxAge: m.retention, MetricsMaxBytes: maxBytes}
}

// monitor is the wired pipeline, ready to run.
type monitor struct {
	collectors []prometheus.Collector
	runs       []func(context.Context) error
}

// build wires worker presence, the collector, the processor, the
// Prometheus sink and, with --influx-url, the InfluxDB sink.
func (m *monitorFlags) build(c *bus.Client, log *slog.Logger) (*monitor, error) {
	presence := c.Presence(nil)
	col, err := collector.New(c, collector.Config{Interval: m.interval}, presence, nil, log)
	if err != nil {
		return nil, err
	}
	proc, err := processor.New(c, processor.Config{}, nil, log)
	if err != nil {
		return nil, err
	}
	ps := prom.New(prom.Config{}, nil)
	mon := &monitor{
		collectors: []prometheus.Collector{col.Metrics(), proc.Metrics(), ps},
		runs:       []func(context.Context) error{presence.Run, col.Run, proc.Run, sink.New(c, "prom", ps, sink.Latest, log).Run},
	}
	if m.influx.URL != "" {
		is, err := influx.New(m.influx, nil, log)
		if err != nil {
			return nil, fmt.Errorf("--influx-*: %w", err)
		}
		mon.collectors = append(mon.collectors, is.Stats())
		mon.runs = append(mon.runs, is.Run, sink.New(c, "influx", is, sink.Durable, log).Run)
	}
	return mon, nil
}

// start runs every stage of the pipeline in g.
func (mon *monitor) start(ctx context.Context, g *errgroup.Group) {
	for _, run := range mon.runs {
		g.Go(func() error { return run(ctx) })
	}
}
