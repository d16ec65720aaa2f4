package borrowing

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pace-platform/pace/flowcontrol/integrator"
)

func TestMaxSeats(t *testing.T) {
	for _, tc := range []struct{ nominal, hand, want int }{
		{5, 6, 1}, {10, 6, 1}, {15, 6, 2}, {20, 6, 3}, {35, 6, 5}, {100, 6, 15}, {200, 6, 30}, {10, 1, 2}, {100, 20, 5},
	} {
		if got := MaxSeats(tc.nominal, tc.hand); got != tc.want {
			t.Errorf("MaxSeats(%d, %d) = %d, want %d", tc.nominal, tc.hand, got, tc.want)
		}
	}
}

func pct(p int) *int { return &p }

// bootstrap is kube-apiserver's mandatory and suggested levels (reference §6.1).
var bootstrap = []Level{
	{Name: "exempt", Exempt: true},
	{Name: "catch-all", NominalConcurrencyShares: 5},
	{Name: "system", NominalConcurrencyShares: 30, LendablePercent: 33},
	{Name: "node-high", NominalConcurrencyShares: 40, LendablePercent: 25},
	{Name: "leader-election", NominalConcurrencyShares: 10},
	{Name: "workload-high", NominalConcurrencyShares: 40, LendablePercent: 50},
	{Name: "workload-low", NominalConcurrencyShares: 100, LendablePercent: 90},
	{Name: "global-default", NominalConcurrencyShares: 20, LendablePercent: 50},
}

// TestBootstrapAt600 checks the limits and idle allocation kube-apiserver
// publishes for its default configuration at ServerCL 600 (reference §4.5, §6.3).
func TestBootstrapAt600(t *testing.T) {
	limits, sum := ComputeLimits(600, bootstrap)
	if sum != 602 {
		t.Errorf("nominal sum = %d, want 602", sum)
	}
	type row struct{ Nominal, Min, Max, Current int }
	want := []row{{0, 0, 600, 0}, {13, 13, 613, 30}, {74, 50, 674, 117}, {98, 73, 698, 170}, {25, 25, 625, 58},
		{98, 49, 698, 114}, {245, 24, 845, 56}, {49, 24, 649, 56}}
	states := make([]LevelState, len(bootstrap))
	for i, l := range bootstrap {
		states[i] = LevelState{Exempt: l.Exempt, Limits: limits[i]}
	}
	alloc := Adjust(sum, states)
	current, fair := alloc.Current, alloc.FairFraction
	got := make([]row, len(bootstrap))
	for i := range bootstrap {
		got[i] = row{limits[i].Nominal, limits[i].Min, limits[i].Max, current[i]}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	// idle: every target is the level's MinCL; the exempt level's take is 0
	if diff := cmp.Diff([]float64{0, 13, 50, 73, 25, 49, 24, 24}, alloc.Target); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	if math.Abs(fair-602.0/258) > 1e-12 {
		t.Errorf("fair fraction = %v, want 602/258", fair)
	}
}

// TestAdjustCases replays upstream's TestUpdateBorrowing scenarios (reference §4.5).
func TestAdjustCases(t *testing.T) {
	levels := []Level{
		{Name: "workload-high", NominalConcurrencyShares: 40, LendablePercent: 50},
		{Name: "workload-low", NominalConcurrencyShares: 100, LendablePercent: 90},
		{Name: "catch-all", NominalConcurrencyShares: 5},
		{Name: "exempt", Exempt: true},
	}
	limits, sum := ComputeLimits((40+100+5)*6, levels)
	if diff := cmp.Diff([]int{240, 600, 30, 0}, []int{limits[0].Nominal, limits[1].Nominal, limits[2].Nominal, limits[3].Nominal}); diff != "" {
		t.Fatalf("nominal (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name   string
		demand []int // high watermark = smoothed demand per level
		want   []int
		// max(floor, smoothed); for exempt its own take (kube shows workload-high's 970)
		wantTarget []float64
	}{
		{"exempt takes everything", []int{970, 970, 970, 970}, []int{120, 60, 30, 970}, []float64{970, 970, 970, 970}},
		{"shared fraction", []int{970, 970, 970, 330}, []int{180, 330, 30, 330}, []float64{970, 970, 970, 330}},
		{"low demand", []int{970, 1, 970, 540}, []int{240, 60, 30, 540}, []float64{970, 60, 970, 540}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			states := make([]LevelState, len(levels))
			for i, l := range levels {
				states[i] = LevelState{Exempt: l.Exempt, Limits: limits[i],
					Demand: DemandStats{HighWatermark: tc.demand[i], Smoothed: float64(tc.demand[i])}}
			}
			alloc := Adjust(sum, states)
			got, fair := alloc.Current, alloc.FairFraction
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
			if fair != 0 {
				t.Errorf("fair fraction = %v in a constrained case, want 0", fair)
			}
			if diff := cmp.Diff(tc.wantTarget, alloc.Target); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLendableLimited follows upstream's TestBorrowing "lendable-limited" case:
// a busy level borrows up to what the other can lend.
func TestLendableLimited(t *testing.T) {
	levels := []Level{
		{Name: "pl0", NominalConcurrencyShares: 100, LendablePercent: 50, BorrowingLimitPercent: pct(67)},
		{Name: "pl1", NominalConcurrencyShares: 100, LendablePercent: 33, BorrowingLimitPercent: pct(50)},
		{Name: "catch-all", NominalConcurrencyShares: 5},
		{Name: "exempt", Exempt: true},
	}
	limits, sum := ComputeLimits(24, levels)
	demand := []int{24, 6, 0, 0}
	states := make([]LevelState, len(levels))
	for i, l := range levels {
		states[i] = LevelState{Exempt: l.Exempt, Limits: limits[i], Demand: DemandStats{HighWatermark: demand[i], Smoothed: float64(demand[i])}}
	}
	got := Adjust(sum, states).Current
	if diff := cmp.Diff([]int{16, 8, 1, 0}, got); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
}

func TestDemandStatsUpdate(t *testing.T) {
	var s DemandStats
	s.Update(integrator.Results{Duration: 10, Average: 4, Deviation: 1, Max: 7.6})
	if s.HighWatermark != 8 || s.Smoothed != 5 {
		t.Fatalf("first update = %+v, want high watermark 8, smoothed 5", s)
	}
	s.Update(integrator.Results{Duration: 10, Average: 1, Deviation: math.NaN(), Max: 1})
	if want := 0.977*5 + 0.023*1; math.Abs(s.Smoothed-want) > 1e-12 || s.StdDev != 0 {
		t.Errorf("decayed smoothed = %v (stddev %v), want %v, 0", s.Smoothed, s.StdDev, want)
	}
	s.Update(integrator.Results{Duration: 0, Max: 3})
	if s.HighWatermark != 3 || s.Average != 1 {
		t.Errorf("empty period = %+v, want high watermark 3 and the old average", s)
	}
}

func TestAllocateErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		required int
		items    []Item
	}{
		{"negative sum", -1, nil},
		{"negative lower bound", 1, []Item{{Target: 1, LowerBound: -1, UpperBound: 2}}},
		{"target below lower bound", 1, []Item{{Target: 1, LowerBound: 2, UpperBound: 3}}},
		{"inverted bounds", 1, []Item{{Target: 2, LowerBound: 2, UpperBound: 1}}},
		{"lower bounds too high", 1, []Item{{Target: 2, LowerBound: 2, UpperBound: 3}}},
		{"upper bounds too low", 9, []Item{{Target: 2, LowerBound: 1, UpperBound: 3}}},
	} {
		if _, _, err := Allocate(tc.required, tc.items); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestAllocateProperties checks 10,000 random problems the way upstream's
// TestConcAlloc does: the allocations sum to the requirement and each one is
// its lower bound, its upper bound or fairProp × target.
func TestAllocateProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1234567890, 0))
	for range 10000 {
		required, items := RandomProblem(rng)
		allocs, fair, err := Allocate(required, items)
		if err != nil {
			t.Fatalf("Allocate(%d, %+v): %v", required, items, err)
		}
		sum := 0.0
		for i, it := range items {
			a := allocs[i]
			sum += a
			if a < it.LowerBound-1e-10 || a > it.UpperBound+1e-10 {
				t.Fatalf("alloc %d = %v outside [%v, %v]", i, a, it.LowerBound, it.UpperBound)
			}
			prop := fair * max(it.Target, MinTarget)
			if !near(a, it.LowerBound) && !near(a, it.UpperBound) && !near(a, prop) {
				t.Fatalf("alloc %d = %v is none of lb %v, ub %v, fair×target %v", i, a, it.LowerBound, it.UpperBound, prop)
			}
		}
		if math.Abs(sum-float64(required)) > 1e-10*max(1, float64(required)) {
			t.Fatalf("allocs %v sum to %v, want %d", allocs, sum, required)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-10*max(1, math.Abs(b)) }
