package runner_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/runner"
)

var quiet = slog.New(slog.DiscardHandler)

func TestRerunRidesOutTemporaryFailures(t *testing.T) {
	runs := 0
	refused := errors.New("refused")
	err := runner.Rerun(t.Context(), quiet, bus.Temporary, func(context.Context) error {
		runs++
		if runs < 3 {
			return fmt.Errorf("get flowschemas.pace-probes: %w", context.DeadlineExceeded)
		}
		return refused
	})
	if !errors.Is(err, refused) || runs != 3 {
		t.Fatalf("Rerun = %v after %d runs, want the refusal of the third", err, runs)
	}
}

func TestRerunEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	err := runner.Rerun(ctx, quiet, bus.Temporary, func(context.Context) error {
		cancel()
		return errors.New("cut short while stopping")
	})
	if err != nil {
		t.Fatalf("Rerun = %v, want nil: what fails while stopping is no failure", err)
	}
}

func TestGroupStopsTheOthersWhenOneFails(t *testing.T) {
	boom := errors.New("boom")
	stopped := make(chan struct{})
	err := runner.Group(
		func(ctx context.Context) error { <-ctx.Done(); close(stopped); return nil },
		func(context.Context) error { return boom },
	)(t.Context())
	if !errors.Is(err, boom) {
		t.Fatalf("Group = %v, want boom", err)
	}
	select {
	case <-stopped:
	default:
		t.Error("the other loop was still running when Group returned")
	}
}

// A term's first instance is built at once (a bad configuration fails at
// start); each later term builds its own, whose metrics replace the last.
func TestTermBuildsAnInstancePerTerm(t *testing.T) {
	builds := 0
	bad := errors.New("bad config")
	failNext := false
	term, err := runner.NewTerm("gate", func() (runner.Loop, prometheus.Collector, error) {
		if failNext {
			return nil, nil, bad
		}
		builds++
		n := builds
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "instance", Help: "which instance"})
		g.Set(float64(n))
		return func(context.Context) error { return fmt.Errorf("instance %d ended", n) }, g, nil
	})
	if err != nil || builds != 1 {
		t.Fatalf("NewTerm: %v after %d builds, want the first built", err, builds)
	}
	instance := func() float64 {
		t.Helper()
		reg := prometheus.NewRegistry()
		reg.MustRegister(term.Metrics())
		families, err := reg.Gather()
		if err != nil || len(families) != 1 {
			t.Fatalf("gathered %v (%v), want the instance gauge", families, err)
		}
		return families[0].GetMetric()[0].GetGauge().GetValue()
	}
	if got := instance(); got != 1 {
		t.Errorf("metrics of instance %v, want 1", got)
	}
	for want := 1; want <= 2; want++ {
		if err := term.Run(t.Context()); err == nil || err.Error() != fmt.Sprintf("instance %d ended", want) {
			t.Fatalf("term %d: %v", want, err)
		}
	}
	if got := instance(); got != 2 {
		t.Errorf("metrics of instance %v, want 2 (the current term's)", got)
	}
	failNext = true
	if err := term.Run(t.Context()); !errors.Is(err, bad) {
		t.Errorf("a term whose instance cannot be built: %v, want the build's error", err)
	}
}
