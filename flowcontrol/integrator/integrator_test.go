package integrator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testclock "k8s.io/utils/clock/testing"
)

func TestIntegrator(t *testing.T) {
	clk := testclock.NewFakePassiveClock(time.Unix(100, 0))
	ig := New(clk)
	ig.Set(2)
	clk.SetTime(clk.Now().Add(time.Second))
	ig.Add(2) // 4
	clk.SetTime(clk.Now().Add(time.Second))
	ig.Set(0)
	clk.SetTime(clk.Now().Add(2 * time.Second))
	// values 2,4,0,0 over four seconds: mean 1.5, E[x²] = (4+16)/4 = 5, var = 2.75
	got := ig.Reset()
	want := Results{Duration: 4, Average: 1.5, Deviation: 1.6583123951777, Min: 0, Max: 4}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 })); diff != "" {
		t.Errorf("Reset() mismatch (-want +got):\n%s", diff)
	}
	ig.Set(3)
	clk.SetTime(clk.Now().Add(time.Second))
	got = ig.Results()
	if got.Min != 0 || got.Max != 3 || got.Average != 3 {
		t.Errorf("second period = %+v, want min 0 (value at reset), max 3, average 3", got)
	}
}
