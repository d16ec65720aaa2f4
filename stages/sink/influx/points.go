package influx

import (
	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/pace-platform/pace/schemas"
)

// Measurement names: Asperathos' (asperathos.md §5.4), so that its Grafana
// dashboards work unchanged.
const (
	JobProgress      = "job_progress"
	TimeProgress     = "time_progress"
	JobParallelism   = "job_parallelism"
	ProgressError    = "application_progress_error"
	pointsPerMessage = 4 // without a cost
	// A job with a cost adds kubejobs_cost's measurements: its cost rate
	// (Asperathos' current_spent), the desired rate and their difference.
	CurrentSpent = "current_spent"
	DesiredCost  = "desired_cost"
	CostError    = "application_cost_error"
)

// Points turns a progress message into Asperathos' four points, tagged
// job=<id> with the value in field "value" (job_parallelism an integer, the
// others floats, as Asperathos wrote them). job_progress also carries Pace's
// own fields. Points are stamped with the sample's time to the nanosecond,
// so two samples in one second no longer overwrite each other.
func Points(p *schemas.Progress) []*write.Point {
	tags := map[string]string{"job": p.Job}
	fields := map[string]any{
		"value": p.JobProgress, "done": int64(p.Done), "dead": int64(p.Dead), "total": int64(p.Total),
		"queue_length": int64(p.QueueLength), "in_flight": int64(p.InFlight), "redeliveries": int64(p.Redeliveries),
		"throughput": p.Throughput, "per_replica": p.PerReplica,
	}
	if p.ETA != nil {
		fields["eta_seconds"] = p.ETA.D().Seconds()
	}
	if p.ReplicasNeeded > 0 {
		fields["replicas_needed"] = int64(p.ReplicasNeeded)
	}
	if p.Mode == schemas.Streaming {
		fields["input_rate"], fields["output_rate"] = p.InputRate, p.OutputRate
		fields["backlog"], fields["lag_seconds"] = int64(p.Backlog), p.Lag.D().Seconds()
	}
	points := []*write.Point{
		write.NewPoint(JobProgress, tags, fields, p.At),
		write.NewPoint(TimeProgress, tags, map[string]any{"value": p.TimeProgress}, p.At),
		write.NewPoint(JobParallelism, tags, map[string]any{"value": int64(p.Replicas)}, p.At),
	}
	if p.DesiredCost == nil {
		points = append(points, write.NewPoint(ProgressError, tags, map[string]any{"value": p.Error}, p.At))
	}
	if p.CostRate != 0 || p.DesiredCost != nil {
		points = append(points, write.NewPoint(CurrentSpent, tags, map[string]any{"value": p.CostRate, "spent": p.Spent,
			"cpu_cores": p.CPUCores, "memory_bytes": p.MemoryBytes}, p.At))
	}
	if p.DesiredCost != nil {
		points = append(points, write.NewPoint(DesiredCost, tags, map[string]any{"value": *p.DesiredCost}, p.At),
			write.NewPoint(CostError, tags, map[string]any{"value": p.Error}, p.At))
	}
	return points
}
