package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/flagvalue"
)

// provisionFlags are the settings of the streams and buckets that every
// process provisions at start (pace up and each pace stage): the same flags
// give the same configuration, so every stage must be given the same ones.
type provisionFlags struct {
	retention time.Duration
	maxBytes  flagvalue.Bytes
	leaseTTL  time.Duration
	queued    int64
	userBytes flagvalue.Bytes
}

func (p *provisionFlags) add(fs *pflag.FlagSet, maxBytesDefault string) {
	fs.DurationVar(&p.retention, "metrics-retention", 7*24*time.Hour, "how long progress (and decisions) stay in the bus: the history read without InfluxDB")
	fs.Var(&p.maxBytes, "metrics-max-bytes", "bound of the metrics stream, oldest first, e.g. 2GiB (default "+maxBytesDefault+")")
	fs.DurationVar(&p.leaseTTL, "lease-ttl", 10*time.Second, "how long a stage leader's lease outlives its last renewal: the longest failover after a crash")
	fs.Var(&p.userBytes, "max-user-queued-bytes", "bytes of items one user's jobs may hold queued or running: each user's jobs get a work stream of their own, that size, reserved in the store, so that no user fills another's, and pushes beyond are refused to their publisher (default, on a bus that authenticates its users: a sixteenth of the work streams' share of the store; -1: one work stream for every job)")
	fs.Int64Var(&p.queued, "max-queued-items", 1_000_000, "most items one job may hold in the work stream, queued or running: a push beyond is refused to its publisher, so that no job fills the stream every job shares (-1: no bound; at least --max-job-items)")
}

func (p *provisionFlags) validate() error {
	if p.retention < time.Minute {
		return usageError("--metrics-retention %s: must be at least 1m", p.retention)
	}
	if p.queued == 0 || p.queued < -1 {
		return usageError("--max-queued-items %d: must be positive, or -1 for no bound", p.queued)
	}
	if p.userBytes < -1 {
		return usageError("--max-user-queued-bytes %d: must be positive, or -1 for one work stream for every job", p.userBytes)
	}
	if p.leaseTTL < time.Second {
		return usageError("--lease-ttl %s: must be at least 1s", p.leaseTTL)
	}
	return nil
}

// limits are the bus settings the flags ask for: each stream's bound is its
// share of maxStore (0: of bus.Limits' default store), the metrics stream's
// --metrics-max-bytes when given. On a bus that authenticates its users,
// each user's jobs have a work stream of their own unless
// --max-user-queued-bytes is -1.
func (p *provisionFlags) limits(maxStore int64, users bool) bus.Limits {
	l := bus.Limits{MetricsMaxAge: p.retention, MetricsMaxBytes: int64(p.maxBytes), StoreBytes: maxStore, LeaseTTL: p.leaseTTL,
		QueuedItemsPerJob: p.queued, QueuedBytesPerUser: int64(p.userBytes)}
	switch {
	case p.userBytes == -1 || (p.userBytes == 0 && !users):
		l.QueuedBytesPerUser = 0
	case p.userBytes == 0:
		l.QueuedBytesPerUser = l.DefaultUserBytes()
	}
	return l
}
