package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
)

// provisionFlags are the settings of the streams and buckets that every
// process provisions at start (pace up and each pace stage): the same flags
// give the same configuration, so every stage must be given the same ones.
type provisionFlags struct {
	retention time.Duration
	maxBytes  byteSize
	leaseTTL  time.Duration
	queued    int64
}

func (p *provisionFlags) add(fs *pflag.FlagSet, maxBytesDefault string) {
	fs.DurationVar(&p.retention, "metrics-retention", 7*24*time.Hour, "how long progress (and decisions) stay in the bus: the history read without InfluxDB")
	fs.Var(&p.maxBytes, "metrics-max-bytes", "bound of the metrics stream, oldest first, e.g. 2GiB (default "+maxBytesDefault+")")
	fs.DurationVar(&p.leaseTTL, "lease-ttl", 10*time.Second, "how long a stage leader's lease outlives its last renewal: the longest failover after a crash")
	fs.Int64Var(&p.queued, "max-queued-items", 1_000_000, "most items one job may hold in the work stream, queued or running: a push beyond is refused to its publisher, so that no job fills the stream every job shares (-1: no bound; at least --max-job-items)")
}

func (p *provisionFlags) validate() error {
	if p.retention < time.Minute {
		return usageError("--metrics-retention %s: must be at least 1m", p.retention)
	}
	if p.queued == 0 || p.queued < -1 {
		return usageError("--max-queued-items %d: must be positive, or -1 for no bound", p.queued)
	}
	if p.leaseTTL < time.Second {
		return usageError("--lease-ttl %s: must be at least 1s", p.leaseTTL)
	}
	return nil
}

// limits are the bus settings the flags ask for: each stream's bound is its
// share of maxStore (0: of bus.Limits' default store), the metrics stream's
// --metrics-max-bytes when given.
func (p *provisionFlags) limits(maxStore int64) bus.Limits {
	return bus.Limits{MetricsMaxAge: p.retention, MetricsMaxBytes: int64(p.maxBytes), StoreBytes: maxStore, LeaseTTL: p.leaseTTL,
		QueuedItemsPerJob: p.queued}
}
