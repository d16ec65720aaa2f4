package retryafter

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testclock "k8s.io/utils/clock/testing"
)

// TestTracker drives the rule of reference §1.7 through a growth and decay trace.
func TestTracker(t *testing.T) {
	clk := testclock.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	tr := New(clk.Now)
	if got := tr.RetryAfter("pl"); got != time.Second {
		t.Fatalf("unknown level = %v, want 1s", got)
	}
	type step struct {
		advance time.Duration
		drops   int
	}
	steps := []step{
		{0, 5},           // second 0: first drop of a new second, history empty -> stays 1
		{time.Second, 1}, // second 1: 5 drops in the last 1 s >= 3 -> 2
		{time.Second, 4}, // second 2: 6 drops in [0,2) >= 6, but the increase was 1 s ago < 2 -> stays 2
		{time.Second, 1}, // second 3: drops in [1,3): 1+4=5 < 6, >= 2 -> stays 2
		{time.Second, 1}, // second 4: drops in [2,4): 4+1 = 5 -> stays 2
		{5 * time.Second, 1},
		{time.Second, 1},
	}
	var got []time.Duration
	for _, s := range steps {
		clk.SetTime(clk.Now().Add(s.advance))
		for range s.drops {
			tr.RecordDropped("pl")
		}
		got = append(got, tr.RetryAfter("pl"))
	}
	// second 9: drops in [7,9): none -> 2-1 = 1; second 10: drops in [9,10): 1 >= 1 -> stays 1
	want := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, time.Second, time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retry-after trace (-want +got):\n%s", diff)
	}
}

func TestTrackerCapsAt32(t *testing.T) {
	clk := testclock.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	tr := New(clk.Now)
	for range 200 {
		for range 1000 {
			tr.RecordDropped("busy")
		}
		clk.SetTime(clk.Now().Add(time.Second))
	}
	if got := tr.RetryAfter("busy"); got != Max*time.Second {
		t.Errorf("under constant overload RetryAfter = %v, want %ds", got, Max)
	}
	if got := tr.RetryAfter("other"); got != time.Second {
		t.Errorf("other level = %v, want 1s", got)
	}
}
