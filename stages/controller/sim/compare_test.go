package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pace-platform/pace/stages/controller"
	"github.com/pace-platform/pace/stages/controller/sim"
)

func TestPrintCompare(t *testing.T) {
	scs, err := sim.LoadDir("../../../examples/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := sim.Compare(scs, controller.Builtin(), sim.Controllers, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, sr := range rep.Scenarios {
		fmt.Printf("%-20s feasible=%v oracle=%.1f\n", sr.Name, sr.Feasible, sr.Oracle)
		for _, n := range sim.Controllers {
			r := sr.Results[n]
			fmt.Printf("   %-9s met=%-5v finish=%7.1f late=%6.1f cost=%8.1f ratio=%.3f act=%d peak=%d p99=%.1f\n", n, r.Met, r.Finish, r.Lateness, r.ReplicaSeconds, r.CostVsOracle, r.ScalingActions, r.PeakReplicas, r.LatencyP99)
		}
		for _, c := range sr.Calibration {
			fmt.Printf("   N=%d sim=%.1f meas=%.1f\n", c.Replicas, c.Simulated, c.Measured)
		}
	}
	fmt.Printf("%+v\n%s\n", rep.Controllers, time.Since(start))
}
