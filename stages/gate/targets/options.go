package targets

import (
	"log/slog"

	"k8s.io/utils/clock"
)

// Option configures what the package's constructors make.
type Option func(*options)

type options struct {
	log *slog.Logger
	clk clock.WithTicker
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the clock (default: the real one).
func WithClock(c clock.WithTicker) Option { return func(o *options) { o.clk = c } }

// apply returns the options opts set, the logger naming the stage.
func apply(stage string, opts []Option) options {
	o := options{log: slog.New(slog.DiscardHandler), clk: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	o.log = o.log.With("stage", stage)
	return o
}
