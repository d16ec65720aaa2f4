package sim_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin/builtin"
	"github.com/pace-platform/pace/stages/controller/sim"
)

const scenarioDir = "../../../examples/scenarios"

func load(t *testing.T, name string) sim.Scenario {
	t.Helper()
	s, err := sim.Load(filepath.Join(scenarioDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, s sim.Scenario, ctrl string) sim.Result {
	t.Helper()
	r, err := sim.Run(s, builtin.Registry(), ctrl)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSuiteSize(t *testing.T) {
	scs, err := sim.LoadDir(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) < 12 {
		t.Errorf("%d scenarios, want at least 12", len(scs))
	}
}

// TestDeterminism: the same seed gives byte-identical output; another seed does not.
func TestDeterminism(t *testing.T) {
	for _, name := range []string{"10-failures.yaml", "12-streaming-bursts.yaml", "06-heavy-tailed.yaml"} {
		s := load(t, name)
		for _, ctrl := range sim.Controllers {
			a, _ := json.Marshal(run(t, s, ctrl))
			b, _ := json.Marshal(run(t, s, ctrl))
			if !bytes.Equal(a, b) {
				t.Errorf("%s with %s: two runs differ", name, ctrl)
			}
		}
		s.Seed++
		a, _ := json.Marshal(run(t, load(t, name), "deadline"))
		b, _ := json.Marshal(run(t, s, "deadline"))
		if bytes.Equal(a, b) {
			t.Errorf("%s: seeds %d and %d gave the same output", name, s.Seed-1, s.Seed)
		}
	}
}

// TestKnownBehaviour checks each controller's signature on Asperathos' setup.
func TestKnownBehaviour(t *testing.T) {
	s := load(t, "01-asperathos-327.yaml")

	// default, triggers 0: +2 at every fresh sample while late, up to max 10.
	def := run(t, s, "default")
	var steps []int
	for _, d := range def.Decisions[:4] {
		steps = append(steps, d.Replicas)
	}
	if diff := cmp.Diff([]int{3, 5, 7, 9}, steps); diff != "" {
		t.Errorf("default's first decisions (-want +got):\n%s", diff)
	}

	// pid with Kp 0.1 Ki 0.1: trunc(−0.1·e − 0.1·Σe) is 0 until the integral
	// reaches about −10, so its first action comes late and the deadline is missed.
	pid := run(t, s, "pid")
	if len(pid.Decisions) == 0 || pid.Decisions[0].T < 20 || pid.Met {
		t.Errorf("pid: first action at %v, met %v; want a late first action and a missed deadline", pid.Decisions, pid.Met)
	}

	// hpa: lag 327 / 10 → 33, limited to max(1+4, 2·1) = 5; the next scale-up
	// waits for the 15 s policy period; nothing scales down within the 300 s window.
	hpa := run(t, s, "hpa")
	if len(hpa.Decisions) < 2 || hpa.Decisions[0].Replicas != 5 || hpa.Decisions[1].T < 17 {
		t.Errorf("hpa decisions = %+v, want 5, then a change a period later", hpa.Decisions)
	}
	for i := 1; i < len(hpa.Decisions); i++ {
		if hpa.Decisions[i].Replicas < hpa.Decisions[i-1].Replicas {
			t.Errorf("hpa scaled down within its 300 s window: %+v", hpa.Decisions)
		}
	}
}

// TestDeadlineMeetsWithoutOscillation: on every feasible batch scenario the
// deadline controller meets the deadline, and its desired replicas only rise
// until the queue drains, then only fall.
func TestDeadlineMeetsWithoutOscillation(t *testing.T) {
	scs, err := sim.LoadDir(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scs {
		if s.Mode != schemas.Batch {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			r := run(t, s, "deadline")
			if r.Feasible && !r.Met {
				t.Errorf("deadline missed by %.1fs on a feasible scenario", r.Lateness)
			}
			falling := false
			for i := 1; i < len(r.Decisions); i++ {
				prev, d := r.Decisions[i-1], r.Decisions[i]
				if d.Replicas < prev.Replicas {
					falling = true
				} else if falling {
					t.Errorf("oscillation: scaled up to %d at %.0fs after scaling down (%s)", d.Replicas, d.T, d.Reason)
				}
			}
		})
	}
}

// TestPublishedDocs: pace sim compare --docs reproduces docs/controllers.md
// and its plots byte for byte, and the headline figures meet the goal or the
// docs state the gap.
func TestPublishedDocs(t *testing.T) {
	scs, err := sim.LoadDir(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sim.Compare(scs, builtin.Registry(), sim.Columns, true)
	if err != nil {
		t.Fatal(err)
	}
	files, err := sim.Docs(rep, sim.Columns)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("../../../docs", filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%v (regenerate with: go run ./cmd/pace sim compare, from the repository root)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/%s is not what pace sim compare generates (regenerate with: go run ./cmd/pace sim compare, from the repository root)", name)
		}
	}
	d := rep.Controllers["deadline"]
	if d.FeasibleDeadlinesMet != 1 {
		t.Errorf("deadline met %.0f%% of feasible deadlines, want 100%%", 100*d.FeasibleDeadlinesMet)
	}
	// No more scaling actions than the 7.5 a scenario it took before it
	// learned from history (the cost: TestDeadlineWithinFivePercentOfOracle).
	if d.ScalingActions > 7.5 {
		t.Errorf("deadline took %.1f scaling actions a scenario, want at most 7.5", d.ScalingActions)
	}
	// A program's first job pays for learning, never for a missed deadline.
	if f := rep.Controllers[sim.FirstJob]; f.FeasibleDeadlinesMet != 1 || f.CostVsOracle <= d.CostVsOracle {
		t.Errorf("first jobs: %+v, want every feasible deadline met at more than a later job's %.3f×", f, d.CostVsOracle)
	}
	for _, other := range []string{"default", "pid", "hpa"} {
		o := rep.Controllers[other]
		if d.CostVsOracle >= o.CostVsOracle || d.FeasibleDeadlinesMet < o.FeasibleDeadlinesMet {
			t.Errorf("deadline (%+v) is not better than %s (%+v)", d, other, o)
		}
	}
}

// TestDeadlineWithinFivePercentOfOracle: over the scenario set, the deadline
// controller, on jobs of a program admission has a history of, spends at most
// 1.05× the clairvoyant oracle's replica-seconds (geometric mean over the
// feasible batch scenarios) and meets every feasible deadline.
func TestDeadlineWithinFivePercentOfOracle(t *testing.T) {
	scs, err := sim.LoadDir(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sim.Compare(scs, builtin.Registry(), []string{"deadline"}, false)
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Controllers["deadline"]
	if d.FeasibleDeadlinesMet != 1 || d.CostVsOracle > 1.05 {
		for _, sr := range rep.Scenarios {
			r := sr.Results["deadline"]
			t.Logf("%s: met %v, %.3f× the oracle", sr.Name, r.Met, r.CostVsOracle)
		}
		t.Errorf("deadline met %.0f%% of feasible deadlines at %.3f× the oracle, want 100%% at most 1.05×", 100*d.FeasibleDeadlinesMet, d.CostVsOracle)
	}
}

// TestLaterJobsStartFromTheForecast: a later job of a program is sized at
// its first sample from the forecast of the earlier ones, where its first
// job holds until a rate is measured after the 45 s start-up.
func TestLaterJobsStartFromTheForecast(t *testing.T) {
	s := load(t, "08-slow-startup.yaml")
	later, err := sim.RunLater(s, builtin.Registry(), "deadline")
	if err != nil {
		t.Fatal(err)
	}
	first := run(t, s, "deadline")
	if len(later.Decisions) == 0 || later.Decisions[0].T > 2 || !strings.Contains(later.Decisions[0].Reason, "(history)") {
		t.Errorf("later job's decisions %+v, want the first at the first sample from the history", later.Decisions)
	}
	if len(first.Decisions) == 0 || first.Decisions[0].T < 45 {
		t.Errorf("first job's decisions %+v, want none before the start-up", first.Decisions)
	}
	if !later.Met || later.CostVsOracle >= first.CostVsOracle {
		t.Errorf("later job met %v at %.3f×, first job at %.3f×: want it met and cheaper", later.Met, later.CostVsOracle, first.CostVsOracle)
	}
}

// TestTunedYardstick: the tuned policy is causal, tuned on other draws, and
// beats the untuned controller where knowing the workload beforehand pays:
// a slow start-up, which the untuned controller learns 47 s in.
func TestTunedYardstick(t *testing.T) {
	s := load(t, "08-slow-startup.yaml")
	tuned, err := sim.RunTuned(s, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	plain := run(t, s, "deadline")
	if !tuned.Met || tuned.Controller != sim.Tuned || !tuned.Forecast || tuned.CostVsOracle >= plain.CostVsOracle {
		t.Errorf("tuned: met %v at %.3f× with %q; untuned deadline at %.3f×: want the deadline met, cheaper, with a forecast (%v)",
			tuned.Met, tuned.CostVsOracle, tuned.Tuning, plain.CostVsOracle, tuned.Forecast)
	}
	if _, err := sim.RunTuned(load(t, "12-streaming-bursts.yaml"), builtin.Registry()); err == nil {
		t.Error("a tuned yardstick for a streaming scenario, want an error")
	}
}

// TestCrashSeconds: crashed attempts and restarts are part of the cost, are
// counted only when workers crash, and each crash costs at least its restart.
func TestCrashSeconds(t *testing.T) {
	s := load(t, "10-failures.yaml")
	f := run(t, s, "deadline")
	if least := float64(f.Redeliveries-f.PeakReplicas) * s.Workers.Startup.D().Seconds(); f.CrashSeconds < least || f.CrashSeconds >= f.ReplicaSeconds {
		t.Errorf("crash seconds = %.1f, want at least %.1f (a restart per redelivered crash) and below the cost %.1f", f.CrashSeconds, least, f.ReplicaSeconds)
	}
	if e := run(t, load(t, "03-easy.yaml"), "deadline"); e.CrashSeconds != 0 {
		t.Errorf("no failures, yet crash seconds = %.1f", e.CrashSeconds)
	}
}
