package sim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// TestParetoKeepsItsMeanAndBound: a Pareto service time has the given mean,
// bounded or not, and a bounded one never exceeds its bound.
func TestParetoKeepsItsMeanAndBound(t *testing.T) {
	for _, max := range []time.Duration{0, 30 * time.Second} {
		s := Service{Dist: "pareto", Mean: schemas.Duration(500 * time.Millisecond), Alpha: 2.5, Max: schemas.Duration(max)}
		rng, draw := rand.New(rand.NewPCG(1, 1)), s.sampler()
		const n = 100_000
		sum, top := 0.0, 0.0
		for range n {
			x := draw(rng)
			sum += x
			top = math.Max(top, x)
		}
		if mean := sum / n; math.Abs(mean-0.5) > 0.02 {
			t.Errorf("max %s: mean %.4f, want 0.5 ± 0.02", max, mean)
		}
		if max > 0 && top > max.Seconds() {
			t.Errorf("an item of %.1fs beyond the bound %s", top, max)
		}
		if max == 0 && top <= 5 {
			t.Errorf("unbounded: the largest of %d items is %.1fs, want a tail beyond 10 × the mean", n, top)
		}
	}
}

// TestStragglers: about the given fraction of replicas is the given factor slower.
func TestStragglers(t *testing.T) {
	s := Service{Stragglers: 0.25, StragglerFactor: 4}
	slow := 0
	for _, x := range s.speeds(10_000, rand.New(rand.NewPCG(1, 4))) {
		switch x {
		case 4:
			slow++
		case 1:
		default:
			t.Fatalf("speed %v, want 1 or 4", x)
		}
	}
	if slow < 2300 || slow > 2700 {
		t.Errorf("%d of 10000 replicas are stragglers, want about 2500", slow)
	}
}
