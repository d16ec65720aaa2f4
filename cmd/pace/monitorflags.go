package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/stages/sink/influx"
)

// monitorFlags configure the monitor pipeline (docs/monitoring.md): the
// collector's sampling and the InfluxDB sink.
type monitorFlags struct {
	interval time.Duration
	influx   influx.Config
}

// add registers the flags of the whole pipeline (pace up).
func (m *monitorFlags) add(fs *pflag.FlagSet) {
	m.addCollector(fs)
	m.addSink(fs)
}

func (m *monitorFlags) addCollector(fs *pflag.FlagSet) {
	fs.DurationVar(&m.interval, "sample-interval", time.Second, "how often every running job is sampled (also on job events and queue activity)")
}

func (m *monitorFlags) addSink(fs *pflag.FlagSet) {
	fs.StringVar(&m.influx.URL, "influx-url", "", `InfluxDB URL, e.g. http://localhost:8086 ("" = no InfluxDB)`)
	fs.StringVar(&m.influx.Bucket, "influx-bucket", "pace", `InfluxDB 2.x bucket, or "db" / "db/rp" on 1.8`)
	fs.StringVar(&m.influx.Token, "influx-token", "", `InfluxDB 2.x token, or "user:password" on 1.8 with auth`)
	fs.StringVar(&m.influx.Org, "influx-org", "", "InfluxDB 2.x organization (ignored by 1.8)")
}

func (m *monitorFlags) validate() error {
	if err := m.validateCollector(); err != nil {
		return err
	}
	return m.validateSink()
}

func (m *monitorFlags) validateCollector() error {
	if m.interval < 10*time.Millisecond {
		return usageError("--sample-interval %s: must be at least 10ms", m.interval)
	}
	return nil
}

func (m *monitorFlags) validateSink() error {
	if m.influx.URL != "" {
		if errs := m.influx.Defaults().Validate(); len(errs) > 0 {
			// Only url and bucket have flags; the token is never echoed.
			if e := errs[0]; e.Field == "url" {
				return usageError("--influx-url %q: %s", m.influx.URL, e.Detail)
			}
			return usageError("--influx-%s: %s", errs[0].Field, errs[0].Detail)
		}
	}
	return nil
}
