package influx

import (
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Config are the InfluxDB sink's settings.
type Config struct {
	// URL of the InfluxDB server, e.g. http://localhost:8086.
	URL string `json:"url"`
	// Bucket is a 2.x bucket, or "db" or "db/rp" on InfluxDB 1.8+.
	Bucket string `json:"bucket"`
	// Token is a 2.x API token, or "user:password" on 1.8+ with auth; may be empty.
	Token string `json:"token,omitempty"`
	// Org is the 2.x organization; ignored by 1.8.
	Org string `json:"org,omitempty"`
	// Buffer bounds the progress messages waiting to be encoded; beyond it
	// they are dropped and counted. 0 means 10000.
	Buffer int `json:"buffer,omitempty"`
	// BatchSize is the points per write request; 0 means 1000.
	BatchSize int `json:"batch_size,omitempty"`
	// FlushInterval is the longest a point waits for its batch; 0 means 1s.
	FlushInterval time.Duration `json:"flush_interval,omitempty"`
	// RetryInterval is the first retry's delay, doubled per attempt up to
	// MaxRetryInterval; 0 means 1s and 30s.
	RetryInterval    time.Duration `json:"retry_interval,omitempty"`
	MaxRetryInterval time.Duration `json:"max_retry_interval,omitempty"`
	// MaxRetries is how often a batch is retried before it is dropped; 0 means 10.
	MaxRetries int `json:"max_retries,omitempty"`
	// Timeout bounds one HTTP request; 0 means 5s.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Defaults returns c with zero fields set to their defaults.
func (c Config) Defaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Buffer == 0 {
		c.Buffer = 10000
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 10
	}
	def(&c.FlushInterval, time.Second)
	def(&c.RetryInterval, time.Second)
	def(&c.MaxRetryInterval, 30*time.Second)
	def(&c.Timeout, 5*time.Second)
	return c
}

// Validate checks a defaulted config.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, field.Invalid(field.NewPath("url"), c.URL, "must be an http or https URL"))
	}
	if c.Bucket == "" {
		errs = append(errs, field.Required(field.NewPath("bucket"), "a 2.x bucket, or db or db/rp on 1.8"))
	}
	for name, v := range map[string]int{"buffer": c.Buffer, "batch_size": c.BatchSize, "max_retries": c.MaxRetries} {
		if v < 1 {
			errs = append(errs, field.Invalid(field.NewPath(name), v, "must be >= 1"))
		}
	}
	for name, v := range map[string]time.Duration{"flush_interval": c.FlushInterval, "retry_interval": c.RetryInterval,
		"max_retry_interval": c.MaxRetryInterval, "timeout": c.Timeout} {
		if v < time.Millisecond {
			errs = append(errs, field.Invalid(field.NewPath(name), v.String(), "must be at least 1ms"))
		}
	}
	return errs
}
