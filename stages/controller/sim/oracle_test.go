package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
)

func oracleScenario(deadline, startup time.Duration, maxReplicas int) Scenario {
	s := Scenario{
		Name: "hand", Items: 1, Deadline: schemas.Duration(deadline),
		Service:  Service{Dist: "constant", Mean: schemas.Duration(time.Second)},
		Workers:  Workers{Startup: schemas.Duration(startup)},
		Replicas: schemas.Replicas{Min: 1, Max: maxReplicas, Initial: 1},
	}
	s.Defaults()
	return s
}

func TestOracleHandComputed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     Scenario
		items []float64
		want  OracleResult
	}{
		{
			// W = 40: one replica ends at 5 + 40 = 45 > 30; two end at 5 + 20 = 25;
			// cost 2·5 + 40 = 50, which is also the fluid bound ceil(40/25)·5 + 40.
			name:  "two replicas needed",
			s:     oracleScenario(30*time.Second, 5*time.Second, 10),
			items: []float64{10, 10, 10, 10},
			want:  OracleResult{Replicas: 2, Makespan: 25, ReplicaSeconds: 50, LowerBound: 50, Feasible: true},
		},
		{
			// Ready at 1 s, due at 11 s. LPT on two replicas: 6→A (7), 5→B (6), 4→B (10),
			// 3→A (10), 2→A (12) > 11, although {6,4} {5,3,2} would fit. Three: 6→A (7),
			// 5→B (6), 4→C (5), 3→C (8), 2→B (8): cost 7+8+8 = 23; the bound is 2·1 + 20 = 22.
			name:  "LPT packing is loose, the bound is not",
			s:     oracleScenario(11*time.Second, time.Second, 10),
			items: []float64{6, 5, 4, 3, 2},
			want:  OracleResult{Replicas: 3, Makespan: 8, ReplicaSeconds: 23, LowerBound: 22, Feasible: true},
		},
		{
			// Ten items of 10 s by 20 s with start-up 5 s need 7 replicas; max is 2.
			name:  "infeasible",
			s:     oracleScenario(20*time.Second, 5*time.Second, 2),
			items: []float64{10, 10, 10, 10, 10, 10, 10, 10, 10, 10},
			want:  OracleResult{Replicas: 2, Makespan: 55, ReplicaSeconds: 110, LowerBound: 110, Feasible: false},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Oracle(tc.s, tc.items)); diff != "" {
				t.Errorf("Oracle (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOracleMeetsCrashes: a crash costs its replica half the attempt and a
// restart, and the item is packed again once its lease has expired, before
// shorter items only if its lease expired by then.
func TestOracleMeetsCrashes(t *testing.T) {
	items := []packed{{time: 4, crashes: 1}, {time: 2}}
	// One replica, ready at 1: A crashes at 3 (half of 1..5) and the replica is
	// back at 4, when A's lease (3 s from 1) has expired: A 4..8, then B 8..10.
	if got, want := lpt(items, []float64{1}, 1, 0, 3, Slowdown{Factor: 1}), (OracleResult{Makespan: 10, ReplicaSeconds: 10}); got != want {
		t.Errorf("one replica: %+v, want %+v", got, want)
	}
	// Two: A crashes on the first (back at 4); B takes the second at 1..3;
	// A is taken again at 4, its lease's end, by the first: 4..8. Cost 8 + 3.
	if got, want := lpt(items, []float64{1, 1}, 1, 0, 3, Slowdown{Factor: 1}), (OracleResult{Makespan: 8, ReplicaSeconds: 11}); got != want {
		t.Errorf("two replicas: %+v, want %+v", got, want)
	}
}

// TestRunMeetsTheOraclesCrashes: a run meets the crashes the oracle knows of,
// every crashing attempt of every item, each redelivered once its lease expires.
func TestRunMeetsTheOraclesCrashes(t *testing.T) {
	s, err := Load("../../../examples/scenarios/10-failures.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for _, n := range itemCrashes(s, s.Items, s.Seed) {
		crashes += n
	}
	r, err := runOnce(s, static(5), s.Seed, &history{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Finished || r.Redeliveries != crashes || crashes == 0 {
		t.Errorf("finished %v with %d redeliveries, want every one of the %d crashes drawn for the items", r.Finished, r.Redeliveries, crashes)
	}
}
