package collector

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Config are the collector's settings.
type Config struct {
	// Interval between two samples of every running job; 0 means 1s.
	Interval time.Duration `json:"interval,omitempty"`
	// ActivityGap is the shortest time between two samples of one job caused
	// by queue activity; 0 means Interval/5, negative disables activity sampling.
	ActivityGap time.Duration `json:"activity_gap,omitempty"`
	// Concurrency is how many jobs are sampled at once; 0 means 32.
	Concurrency int `json:"concurrency,omitempty"`
	// RawTTL is how long a raw sample stays on the bus (Nats-TTL); the
	// processor reads it at once, and progress is kept longer. 0 means 1h;
	// negative publishes without a TTL (samples live as long as progress).
	RawTTL time.Duration `json:"raw_ttl,omitempty"`
	// CountConsumerFrom is how many results a job has before a counting
	// consumer counts them: below, they are counted from the results
	// stream's subject list, whose cost grows with the results; from it on,
	// by a consumer, whose cost does not but which holds about 45 KB of the
	// server's memory while the job runs. 0 means 1000.
	CountConsumerFrom int `json:"count_consumer_from,omitempty"`
}

// Defaults returns c with zero fields set to their defaults.
func (c Config) Defaults() Config {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.ActivityGap == 0 {
		c.ActivityGap = c.Interval / 5
	}
	if c.Concurrency == 0 {
		c.Concurrency = 32
	}
	if c.RawTTL == 0 {
		c.RawTTL = time.Hour
	}
	if c.CountConsumerFrom == 0 {
		c.CountConsumerFrom = 1000
	}
	return c
}

// Validate checks a defaulted config.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.Interval < 10*time.Millisecond {
		errs = append(errs, field.Invalid(field.NewPath("interval"), c.Interval.String(), "must be at least 10ms"))
	}
	if c.RawTTL >= 0 && c.RawTTL < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("raw_ttl"), c.RawTTL.String(), "must be at least 1s"))
	}
	if c.CountConsumerFrom < 1 {
		errs = append(errs, field.Invalid(field.NewPath("count_consumer_from"), c.CountConsumerFrom, "must be at least 1"))
	}
	if c.Concurrency < 1 {
		errs = append(errs, field.Invalid(field.NewPath("concurrency"), c.Concurrency, "must be >= 1"))
	}
	return errs
}
