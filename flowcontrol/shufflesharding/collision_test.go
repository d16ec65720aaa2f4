package shufflesharding

import (
	"math"
	"testing"
)

func TestMouseCrushProbability(t *testing.T) {
	// One elephant crushes the mouse only if it holds exactly the mouse's hand.
	if got, want := MouseCrushProbability(64, 8, 1), 1/choose(64, 8); math.Abs(got-want) > 1e-24 {
		t.Errorf("P(64,8,1) = %v, want 1/C(64,8) = %v", got, want)
	}
	// A hand as large as the deck is always crushed.
	if got := MouseCrushProbability(8, 8, 1); got != 1 {
		t.Errorf("P(8,8,1) = %v, want 1", got)
	}
	// Hand 1: the mouse's queue is hit unless every elephant misses it.
	for _, k := range []int{1, 4, 16} {
		want := 1 - math.Pow(63.0/64, float64(k))
		if got := MouseCrushProbability(64, 1, k); math.Abs(got-want) > 1e-12 {
			t.Errorf("P(64,1,%d) = %v, want %v", k, got, want)
		}
	}
	// More elephants never help, a larger hand (same deck) helps against few elephants.
	if MouseCrushProbability(64, 8, 4) >= MouseCrushProbability(64, 8, 16) {
		t.Error("not monotone in elephants")
	}
	if MouseCrushProbability(128, 8, 4) >= MouseCrushProbability(64, 8, 4) {
		t.Error("a larger deck does not help")
	}
}
