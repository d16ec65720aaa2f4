package apf

import (
	"sync"

	"github.com/pace-platform/pace/flowcontrol/work"
)

type groupResource struct{ group, resource string }

// ObjectCounts holds each resource's object count and average object size
// for the work estimator of lists, as kube-apiserver's storage object counts
// do. Its sources are whatever the process knows: the lists `pace gate proxy`
// relays (apfhttp.LearnObjectCounts), Pace's own job count. A resource never reported
// is unknown and its lists cost the minimum, as an aggregated resource's do
// in kube. A count is kept until its source reports a new one: unlike kube,
// which charges the maximum when its once-a-minute storage count stops
// updating, a count learned from traffic is legitimately old when nobody
// lists. It is safe for concurrent use.
type ObjectCounts struct {
	mu    sync.RWMutex // guards stats
	stats map[groupResource]work.Stats
}

// NewObjectCounts returns an empty set of counts.
func NewObjectCounts() *ObjectCounts {
	return &ObjectCounts{stats: map[groupResource]work.Stats{}}
}

// Set records the stats of a resource.
func (c *ObjectCounts) Set(group, resource string, s work.Stats) {
	c.mu.Lock()
	c.stats[groupResource{group, resource}] = s
	c.mu.Unlock()
}

// ObjectStats implements work.ObjectCounter.
func (c *ObjectCounts) ObjectStats(group, resource string) (work.Stats, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.stats[groupResource{group, resource}]
	if !ok {
		return work.Stats{}, work.ErrObjectCountNotFound
	}
	return s, nil
}
