package manager

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// jobCountPeriod is how often the job count of the APF work estimator is
// refreshed: kube-apiserver refreshes its storage object counts every minute.
const jobCountPeriod = time.Minute

// CountJobs returns a loop that tells the work estimator how many jobs the
// manager API's lists read (GET /submissions reads every record, whoever
// asks) and their average JSON size, at once and then every jobCountPeriod,
// until ctx ends. A failed count keeps the previous one.
func CountJobs(c *bus.Client, counts *apf.ObjectCounts, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		tick := time.NewTicker(jobCountPeriod)
		defer tick.Stop()
		for {
			if jobs, err := c.Jobs().List(ctx); err != nil {
				if ctx.Err() == nil {
					log.Warn("job count for the APF work estimator failed; keeping the last one", "err", err)
				}
			} else {
				var size int64
				for _, rec := range jobs {
					b, _ := json.Marshal(rec) // a decoded record encodes again
					size += int64(len(b))
				}
				s := work.Stats{ObjectCount: int64(len(jobs))}
				if len(jobs) > 0 {
					s.AverageObjectSizeBytes = size / int64(len(jobs))
				}
				counts.Set(apfhttp.PaceGroup, "submissions", s)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	}
}
