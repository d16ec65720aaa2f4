package influx_test

import (
	"slices"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/sink/influx"
)

func names(points []*write.Point) []string {
	var out []string
	for _, p := range points {
		out = append(out, p.Name())
	}
	return out
}

// A job controlled by its cost gets kubejobs_cost's measurements, its cost
// error in place of the progress error; a priced job without a desired
// cost keeps the progress error and adds what it spends.
func TestCostPointsAreKubejobsCosts(t *testing.T) {
	desired := 1.5
	p := &schemas.Progress{Job: "j", At: time.Now(), Replicas: 3, Error: 1.5, CostRate: 3, Spent: 0.2, DesiredCost: &desired}
	if got, want := names(influx.Points(p)), []string{"job_progress", "time_progress", "job_parallelism",
		"current_spent", "desired_cost", "application_cost_error"}; !slices.Equal(got, want) {
		t.Errorf("controlled by cost: %v, want %v", got, want)
	}
	p.DesiredCost = nil
	if got, want := names(influx.Points(p)), []string{"job_progress", "time_progress", "job_parallelism",
		"application_progress_error", "current_spent"}; !slices.Equal(got, want) {
		t.Errorf("priced only: %v, want %v", got, want)
	}
	p.CostRate, p.Spent = 0, 0
	if got := names(influx.Points(p)); len(got) != 4 {
		t.Errorf("without a cost: %v, want Asperathos' four points", got)
	}
}
