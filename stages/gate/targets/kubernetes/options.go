package kubernetes

import "log/slog"

// Option configures a Runtime or Clusters.
type Option func(*options)

type options struct{ log *slog.Logger }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// logger returns the logger opts set.
func logger(opts []Option) *slog.Logger {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return o.log
}
