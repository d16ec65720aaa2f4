package flowcontrol

import (
	"time"

	"github.com/pace-platform/pace/flowcontrol/borrowing"
	"github.com/pace-platform/pace/flowcontrol/queueset"
)

// LevelDump describes one priority level for debugging.
type LevelDump struct {
	Name         string                `json:"name"`
	Lingering    bool                  `json:"lingering,omitempty"` // removed, draining
	Limits       borrowing.Limits      `json:"limits"`
	CurrentLimit int                   `json:"currentLimit"`
	Target       float64               `json:"target"` // the last adjustment's seat target (borrowing.Allocation)
	MaxSeats     int                   `json:"maxSeats,omitempty"`
	Demand       borrowing.DemandStats `json:"demand"`
	RetryAfter   time.Duration         `json:"retryAfter"`
	QueueSet     queueset.Dump         `json:"queueSet"`
}

// Dump returns a snapshot of every level: limits, demand, queues, requests and seats.
func (c *Controller) Dump() []LevelDump {
	c.mu.Lock()
	defer c.mu.Unlock()
	tab := c.tab.Load()
	out := make([]LevelDump, 0, len(tab.order))
	for _, lv := range tab.order {
		out = append(out, LevelDump{Name: lv.cfg.Name, Lingering: lv.lingering, Limits: lv.limits, CurrentLimit: lv.current, Target: lv.target, MaxSeats: lv.maxSeats,
			Demand: lv.demand, RetryAfter: c.retryAfter.RetryAfter(lv.cfg.Name), QueueSet: lv.qs.Dump()})
	}
	return out
}
