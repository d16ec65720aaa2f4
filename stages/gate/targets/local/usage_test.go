package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/stages/gate/targets/local"
)

// Measure sums the CPU time and memory of a metered job's process groups,
// children included, and never measures a job without a cost.
func TestMeasureSumsAMeteredJobsProcesses(t *testing.T) {
	r := newRuntime(t, time.Second)
	ctx := context.Background()
	// The replica's child burns CPU for a moment, then holds 64 MB until killed.
	burn := `python3 -c "held = b'x' * (64 << 20); sum(range(5_000_000)); import time; time.sleep(600)"`
	metered := local.Worker{Job: "priced", Command: []string{"sh", "-c", burn}, Metered: true}
	plain := local.Worker{Job: "free", Command: []string{"sh", "-c", burn}}
	for _, w := range []local.Worker{metered, plain} {
		if _, err := r.Scale(ctx, w, 2); err != nil {
			t.Fatal(err)
		}
	}
	var use []local.Use
	bustest.Eventually(t, 10*time.Second, "both replicas burnt CPU and hold their memory", func() bool {
		use = r.Measure()
		return len(use) == 1 && use[0].Replicas == 2 && use[0].CPUSeconds > 0.1 && use[0].MemoryBytes > 2*64<<20
	})
	if use[0].Job != "priced" {
		t.Errorf("measured %+v, want the metered job alone", use)
	}
}
