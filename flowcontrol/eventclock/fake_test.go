package eventclock

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFakeOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk := NewFake(t0)
	var got []string
	note := func(name string) func(time.Time) {
		return func(now time.Time) { got = append(got, name+"@"+now.Sub(t0).String()) }
	}
	clk.EventAfterDuration(note("b"), 2*time.Second)
	clk.EventAfterDuration(note("a"), time.Second)
	clk.EventAfterDuration(func(now time.Time) {
		note("c")(now)
		clk.EventAfterDuration(note("d"), 0) // same time, runs after everything already due then
	}, 2*time.Second)
	clk.EventAfterDuration(note("late"), 10*time.Second)
	if n := clk.Run(t0.Add(5 * time.Second)); n != 4 {
		t.Errorf("Run fired %d events, want 4", n)
	}
	if diff := cmp.Diff([]string{"a@1s", "b@2s", "c@2s", "d@2s"}, got); diff != "" {
		t.Errorf("order mismatch (-want +got):\n%s", diff)
	}
	if got, want := clk.Now(), t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
	clk.Step(3 * time.Second)
	if got, want := clk.Now(), t0.Add(5*time.Second); !got.Equal(want) {
		t.Errorf("after Step, Now() = %v, want %v", got, want)
	}
	if clk.Pending() != 1 {
		t.Errorf("Pending() = %d, want 1", clk.Pending())
	}
}
