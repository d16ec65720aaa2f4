package sim

import (
	"math"
	"testing"

	"github.com/pace-platform/pace/schemas"
)

// TestHistoryForecastsTheNextRun: after a run, the next job of the same
// program gets the manager's forecast: the mean item time and start-up seen.
func TestHistoryForecastsTheNextRun(t *testing.T) {
	s, err := Load("../../../examples/scenarios/11-many-small-jobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var h history
	if j := h.forecast(job(s)); j.ItemTime != 0 || j.Basis != "" {
		t.Fatalf("forecast before any run: %+v", j)
	}
	if _, err := runOnce(s, static(2), s.Seed, &h); err != nil {
		t.Fatal(err)
	}
	j := h.forecast(job(s))
	mean, startup := s.Service.Mean.D().Seconds(), s.Workers.Startup.D().Seconds()
	// 40 exponential items: the sample mean is within 50 % of the mean; the
	// first result comes one item after the start-up.
	if got := j.ItemTime.Seconds(); math.Abs(got-mean) > mean/2 || j.Basis != schemas.BasisHistory {
		t.Errorf("item time %.2fs (basis %q), want about %.2fs from history", got, j.Basis, mean)
	}
	if got := j.Startup.Seconds(); math.Abs(got-startup) > 2*mean {
		t.Errorf("start-up %.2fs, want about %.2fs", got, startup)
	}
}
