package sim

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Tuned names the second yardstick, beside the oracle: the best causal
// policy found offline (RunTuned).
const Tuned = "tuned"

// setting is one policy RunTuned tries: deadline controller parameters and
// whether the job starts with the forecast of the training draws.
type setting struct {
	params   string
	forecast bool
}

// tuningGrid holds the settings RunTuned tries: how much slack to keep (a
// high margin rushes the job), how fast the rate estimate forgets, how early
// replicas are released, and whether the workload's item time and start-up
// are known from the start.
var tuningGrid = func() []setting {
	var out []setting
	for _, forecast := range []bool{false, true} {
		for _, margin := range []float64{0.02, 0.05, 0.1, 0.2, 0.35, 0.5} {
			for _, window := range []string{"15s", "60s"} {
				for _, down := range []float64{0.2, 0.5} {
					params := fmt.Sprintf(`{"margin":%g,"rate_window":%q,"tolerance_down":%g}`, margin, window, down)
					out = append(out, setting{params, forecast})
				}
			}
		}
	}
	return out
}()

// trainingDraws is how many other draws of a scenario RunTuned tunes on.
const trainingDraws = 5

// RunTuned runs the best causal policy found offline for the batch scenario
// s. Among the settings of tuningGrid it takes the one that, over
// trainingDraws other draws of s (seeds 1000, 2000, … apart), meets every
// deadline the oracle meets at the least replica-seconds ÷ oracle (geometric
// mean), and runs it on s's own seed. At run time the policy knows only what
// the controller knows; beyond that it knows the workload's distribution,
// through the tuning and the forecast, as an operator who had tried each
// setting on past jobs of the same program would. Result's Tuning names the
// parameters chosen, Forecast whether the job started with the forecast.
func RunTuned(s Scenario, reg plugin.Registry) (Result, error) {
	if s.Mode != schemas.Batch {
		return Result{}, fmt.Errorf("scenario %s: the tuned yardstick is for batch scenarios", s.Name)
	}
	with := func(s Scenario, params string) Scenario {
		s.Controllers = map[string]json.RawMessage{"deadline": json.RawMessage(params)}
		return s
	}
	draw := func(k int) Scenario {
		d := s
		d.Seed = s.Seed + 1000*uint64(k+1)
		return d
	}
	// The forecast is what the manager learns from the training draws.
	learned, err := programHistory(s, reg)
	if err != nil {
		return Result{}, err
	}
	start := func(st setting) *history {
		if st.forecast {
			h := learned
			return &h
		}
		return &history{}
	}
	best, bestCost := tuningGrid[0], math.Inf(1)
	for _, st := range tuningGrid {
		logSum := 0.0
		for k := range trainingDraws {
			r, err := runWith(with(draw(k), st.params), reg, "deadline", start(st))
			if err != nil {
				return Result{}, err
			}
			if r.Feasible && !r.Met {
				logSum = math.Inf(1)
				break
			}
			logSum += math.Log(r.ReplicaSeconds / r.Oracle)
		}
		if logSum < bestCost {
			best, bestCost = st, logSum
		}
	}
	r, err := runWith(with(s, best.params), reg, "deadline", start(best))
	if err != nil {
		return Result{}, err
	}
	r.Controller, r.Tuning, r.Forecast = Tuned, best.params, best.forecast
	return r, nil
}
