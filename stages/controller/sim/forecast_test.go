package sim_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/sim"
)

// The manager's forecast at admission (schemas.Forecast) predicts, within
// 10 %, when a job whose item time and replicas are known finishes in the
// simulator: a run at replicas.max with its start-up and the item times
// drawn as the scenario says.
func TestForecastMatchesSimulatedRuns(t *testing.T) {
	for _, tc := range []struct {
		items, replicas int
		dist            string
		mean, startup   time.Duration
	}{
		{100, 10, "constant", time.Second, time.Second},
		{327, 4, "constant", 200 * time.Millisecond, 5 * time.Second},
		{800, 8, "lognormal", 2 * time.Second, 10 * time.Second},
		{60, 3, "lognormal", 5 * time.Second, 2 * time.Second},
	} {
		t.Run(fmt.Sprintf("%d items on %d, %s %s", tc.items, tc.replicas, tc.dist, tc.mean), func(t *testing.T) {
			s := sim.Scenario{Name: "forecast", Seed: 7, Mode: schemas.Batch, Items: tc.items,
				Deadline: schemas.Duration(time.Hour),
				Service:  sim.Service{Dist: tc.dist, Mean: schemas.Duration(tc.mean), Sigma: 0.3},
				Workers:  sim.Workers{Startup: schemas.Duration(tc.startup)}}
			s.Defaults()
			res, err := sim.RunStatic(s, tc.replicas)
			if err != nil {
				t.Fatal(err)
			}
			f := schemas.Forecast(tc.items, tc.replicas, tc.mean, tc.startup, time.Hour)
			predicted := f.ETA.D().Seconds()
			t.Logf("forecast %.1fs, simulated %.1fs", predicted, res.Finish)
			if !res.Finished || math.Abs(predicted-res.Finish)/res.Finish > 0.10 {
				t.Errorf("forecast %.1fs, simulated finish %.1fs (finished %v): more than 10%% apart", predicted, res.Finish, res.Finished)
			}
		})
	}
}
