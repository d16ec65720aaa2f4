package apf

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/flowcontrol"
)

func levelDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, name), help, labels, nil)
}

var (
	descNominal      = levelDesc("nominal_limit_seats", "Nominal number of execution seats configured for each priority level", "priority_level")
	descLower        = levelDesc("lower_limit_seats", "Configured lower bound on number of execution seats available to each priority level", "priority_level")
	descUpper        = levelDesc("upper_limit_seats", "Configured upper bound on number of execution seats available to each priority level", "priority_level")
	descCurrent      = levelDesc("current_limit_seats", "current derived number of execution seats available to each priority level", "priority_level")
	descHighWater    = levelDesc("demand_seats_high_watermark", "High watermark, over last adjustment period, of demand_seats", "priority_level")
	descAverage      = levelDesc("demand_seats_average", "Time-weighted average, over last adjustment period, of demand_seats", "priority_level")
	descStdev        = levelDesc("demand_seats_stdev", "Time-weighted standard deviation, over last adjustment period, of demand_seats", "priority_level")
	descSmoothed     = levelDesc("demand_seats_smoothed", "Smoothed seat demands", "priority_level")
	descTarget       = levelDesc("target_seats", "Seat allocation targets", "priority_level")
	descCurrentR     = levelDesc("current_r", "R(time of last change)", "priority_level")
	descDispatchR    = levelDesc("dispatch_r", "R(time of last dispatch)", "priority_level")
	descLatestS      = levelDesc("latest_s", "S(most recently dispatched request)", "priority_level")
	descNextS        = levelDesc("next_s_bounds", "min and max, over queues, of S(oldest waiting request in queue)", "priority_level", "bound")
	descNextDiscount = levelDesc("next_discounted_s_bounds", "min and max, over queues, of S(oldest waiting request in queue) - estimated work in progress", "priority_level", "bound")
	descEpoch        = levelDesc("epoch_advance_total", "Number of times the queueset's progress meter jumped backward", "priority_level", "success")
	descNoAccommod   = levelDesc("request_dispatch_no_accommodation_total", "Number of times a dispatch attempt resulted in a non accommodation due to lack of available seats", "priority_level", "flow_schema")
)

// levelCollector reads each priority level's limits, demand and virtual
// time from the gate's engine at scrape time. A level removed from the
// policy keeps its last series, as kube-apiserver's vectors keep theirs:
// an alert on the level sees its values stop changing, not vanish.
type levelCollector struct {
	mu      sync.Mutex // guards the fields below
	gate    *Gate
	last    map[string][]prometheus.Metric // each level's series at the last scrape
	removed []string                       // levels gone from the engine, oldest first
}

// maxRemovedLevels bounds the removed levels whose series are kept: a policy
// that keeps renaming its levels does not grow /metrics without end.
const maxRemovedLevels = 100

func (c *levelCollector) set(g *Gate) {
	c.mu.Lock()
	c.gate = g
	c.mu.Unlock()
}

func (c *levelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNominal, descLower, descUpper, descCurrent, descHighWater, descAverage, descStdev,
		descSmoothed, descTarget, descCurrentR, descDispatchR, descLatestS, descNextS, descNextDiscount, descEpoch, descNoAccommod} {
		ch <- d
	}
}

func (c *levelCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gate == nil {
		return
	}
	now := map[string][]prometheus.Metric{}
	for _, l := range c.gate.Dump() {
		now[l.Name] = levelSeries(l)
	}
	for name := range c.last {
		if _, ok := now[name]; !ok && !slices.Contains(c.removed, name) {
			c.removed = append(c.removed, name)
		}
	}
	c.removed = slices.DeleteFunc(c.removed, func(name string) bool { _, back := now[name]; return back })
	if n := len(c.removed) - maxRemovedLevels; n > 0 {
		c.removed = slices.Delete(c.removed, 0, n)
	}
	for _, name := range c.removed {
		now[name] = c.last[name]
	}
	c.last = now
	for _, ms := range now {
		for _, m := range ms {
			ch <- m
		}
	}
}

// levelSeries are the series of one level's dump.
func levelSeries(l flowcontrol.LevelDump) []prometheus.Metric {
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	gauge(descNominal, float64(l.Limits.Nominal), l.Name)
	gauge(descLower, float64(l.Limits.Min), l.Name)
	gauge(descUpper, float64(l.Limits.Max), l.Name)
	gauge(descCurrent, float64(l.CurrentLimit), l.Name)
	gauge(descHighWater, float64(l.Demand.HighWatermark), l.Name)
	gauge(descAverage, l.Demand.Average, l.Name)
	gauge(descStdev, l.Demand.StdDev, l.Name)
	gauge(descSmoothed, l.Demand.Smoothed, l.Name)
	gauge(descTarget, l.Target, l.Name)
	gauge(descCurrentR, l.QueueSet.CurrentR.Float(), l.Name)
	// kube sets these at each dispatch from a queue, so a level that never
	// dispatched from one has none
	if d := l.QueueSet.LastDispatch; d.Dispatches > 0 {
		gauge(descDispatchR, d.R.Float(), l.Name)
		gauge(descLatestS, d.S.Float(), l.Name)
		gauge(descNextS, d.SMin.Float(), l.Name, "min")
		gauge(descNextS, d.SMax.Float(), l.Name, "max")
		gauge(descNextDiscount, d.DiscountedSMin, l.Name, "min")
		gauge(descNextDiscount, d.DiscountedSMax, l.Name, "max")
	}
	out = append(out,
		prometheus.MustNewConstMetric(descEpoch, prometheus.CounterValue, float64(l.QueueSet.EpochAdvances), l.Name, "true"),
		prometheus.MustNewConstMetric(descEpoch, prometheus.CounterValue, float64(l.QueueSet.EpochAdvanceFailure), l.Name, "false"))
	for fs, n := range l.QueueSet.NoAccommodation {
		out = append(out, prometheus.MustNewConstMetric(descNoAccommod, prometheus.CounterValue, float64(n), l.Name, fs))
	}
	return out
}
