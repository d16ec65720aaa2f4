package policysource

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

// File reads a policy file (policy.Load) and applies it over Pace's
// defaults, then reads it again every Every (default 2 s) and applies it
// when its content changed and then stayed the same for one more read (an
// editor's write in progress is not applied half-done). A file that no
// longer loads is logged and the policy in force stays.
type File struct {
	Path  string
	Every time.Duration
	Log   *slog.Logger
	// Clock ticks the reads; default the real clock.
	Clock clock.WithTicker
}

// Run implements Source.
func (f *File) Run(ctx context.Context, apply Apply) error {
	applied, err := os.ReadFile(f.Path)
	if err != nil {
		return err
	}
	objs, err := policy.Load(bytes.NewReader(applied))
	if err != nil {
		return err
	}
	if err := apply(ctx, policy.Overlay(policy.Defaults(), objs)); err != nil {
		return err
	}
	every := f.Every
	if every <= 0 {
		every = 2 * time.Second
	}
	log := f.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var clk clock.WithTicker = clock.RealClock{}
	if f.Clock != nil {
		clk = f.Clock
	}
	t := clk.NewTicker(every)
	defer t.Stop()
	seen := applied // the content of the last read
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		b, err := os.ReadFile(f.Path)
		if err != nil {
			log.Warn("flowcontrol config not read again; the policy in force stays", "file", f.Path, "err", err)
			continue
		}
		stable := bytes.Equal(b, seen)
		seen = b
		if !stable || bytes.Equal(b, applied) {
			continue
		}
		applied = b
		objs, err := policy.Load(bytes.NewReader(b))
		if err == nil {
			err = apply(ctx, policy.Overlay(policy.Defaults(), objs))
		}
		if err != nil {
			log.Warn("flowcontrol config changed but not applied; the policy in force stays", "file", f.Path, "err", err)
			continue
		}
		log.Info("flowcontrol config reloaded", "file", f.Path, "flow_schemas", len(objs.FlowSchemas), "priority_levels", len(objs.PriorityLevels))
	}
}
