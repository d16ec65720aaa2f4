package deadline

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Name is the plugin's registry name.
const Name = schemas.DeadlineController

// Point is one timed recommendation.
type Point struct {
	At       time.Time `json:"at"`
	Replicas float64   `json:"replicas"`
}

// ScaleUp is a scale-up from Base live replicas to Target, asked for At.
type ScaleUp struct {
	At       time.Time `json:"at"`
	Base     int       `json:"base"`
	Target   int       `json:"target"`
	Measured bool      `json:"measured,omitempty"`
}

// Mark is the part of a sample the rate estimate differentiates.
type Mark struct {
	At       time.Time `json:"at"`
	Finished int       `json:"finished"`
	Busy     int       `json:"busy"`
	Live     int       `json:"live"`
	Steady   bool      `json:"steady,omitempty"`
}

// State is what the controller remembers between samples.
type State struct {
	LastAt time.Time `json:"last_at,omitzero"`
	// Gap is the time between the last two decisions; 0 before two.
	Gap time.Duration `json:"gap,omitempty"`
	// Replicas is the count last asked for; 0 before any.
	Replicas int `json:"replicas,omitempty"`
	// Prev is the previous fresh sample; Items and Busy the decayed sums of
	// finished items and busy replica-seconds.
	// Measured is set by the first interval with a busy replica.
	Prev     *Mark   `json:"prev,omitempty"`
	Items    float64 `json:"items"`
	Busy     float64 `json:"busy"`
	Measured bool    `json:"measured,omitempty"`
	// RecentItems and RecentBusy are the same sums over a quarter of the
	// window; ChangedAt is when they last replaced the long ones.
	RecentItems float64   `json:"recent_items,omitempty"`
	RecentBusy  float64   `json:"recent_busy,omitempty"`
	ChangedAt   time.Time `json:"changed_at,omitzero"`
	// LastUpAt is when replicas were last added.
	LastUpAt time.Time `json:"last_up_at,omitzero"`
	// Pending is the last scale-up not yet seen live (the job's start counts
	// as one); Startup the start-up delay measured from them (0: none yet).
	Pending *ScaleUp      `json:"pending,omitempty"`
	Startup time.Duration `json:"startup,omitempty"`
	// Learned is how long after the job's start the first rate was measured.
	Learned time.Duration `json:"learned,omitempty"`
	// Recommendations within the longer stabilization window, oldest first.
	Recommendations []Point `json:"recommendations,omitempty"`
}

// Controller is the deadline controller of one job.
type Controller struct{ plugin.Base[Config, State] }

// New builds a deadline controller; params is a JSON Config.
func New(job plugin.Job, params json.RawMessage) (plugin.Controller, error) {
	st := State{Replicas: job.Initial}
	if job.ItemTime > 0 {
		// The forecast counts as items already measured: the first intervals
		// refine it rather than replace it.
		w := priorWeight(job)
		st.Items, st.Busy = w, w*job.ItemTime.Seconds()
	}
	b, err := plugin.NewBase[Config](Name, job, params, st)
	if err != nil {
		return nil, err
	}
	return &Controller{b}, nil
}

// fewItems is the least count of recent items a change of rate is judged on;
// changeRatio the factor between the recent and the long-run rate that is one.
const (
	fewItems    = 10
	changeRatio = 1.3
)

// A job's forecast item time weighs as hintItems items in the rate
// estimate when it is the spec's hint, and as the items of earlier jobs a
// history rests on, between hintItems and historyItems, when it is history.
// historyItems is also the history the manager calls high confidence: past
// it, the items' own noise no longer sets how far the first ones move the
// estimate, and a change of pace is caught by the recent sums (fewItems) in
// any case.
const (
	hintItems    = 10
	historyItems = 100
)

// priorWeight is the weight, in items, of job's forecast item time.
func priorWeight(job plugin.Job) float64 {
	if job.Basis == schemas.BasisHistory {
		return float64(min(max(job.Samples, hintItems), historyItems))
	}
	return hintItems
}

// startup is the start-up delay to plan with: the measured one, else the one
// earlier jobs of the same program measured, else the configured one.
func (c *Controller) startup() time.Duration {
	switch {
	case c.Mem.Startup > 0:
		return c.Mem.Startup
	case c.Job.Basis == schemas.BasisHistory && c.Job.Startup > 0:
		return c.Job.Startup
	}
	return c.Cfg.StartupDelay.D()
}

// watchStartup measures the time from a scale-up to its first replica being
// live. The scale-up stays pending until all its replicas are live, or for
// three start-up delays (a crashed replica may never show up).
func (c *Controller) watchStartup(p schemas.Progress) {
	s := &c.Mem
	if s.Pending == nil && s.Prev == nil && p.Replicas < c.Job.Initial {
		start := p.At // the job's start: a scale-up from 0 to initial
		if c.Job.Expected > 0 {
			start = p.At.Add(-time.Duration(p.TimeProgress * float64(c.Job.Expected)))
		}
		s.Pending = &ScaleUp{At: start, Base: 0, Target: c.Job.Initial}
		if s.LastUpAt.IsZero() {
			s.LastUpAt = start // the initial replicas are starting too
		}
	}
	up := s.Pending
	if up == nil {
		return
	}
	took := p.At.Sub(up.At)
	if !up.Measured && p.Replicas > up.Base {
		if prev := s.Prev; prev != nil && prev.At.After(up.At) {
			took = prev.At.Add(p.At.Sub(prev.At) / 2).Sub(up.At) // live at some time between the two samples
		}
		up.Measured = true
		if s.Startup == 0 {
			s.Startup = took
		} else {
			s.Startup = (s.Startup + took) / 2
		}
	}
	if p.Replicas >= up.Target || (up.Measured && took > 3*c.startup()) {
		s.Pending = nil
	}
}

// observe updates the decayed throughput sums with p. Busy replicas are the
// live ones holding an item; when no scale-up is pending, replicas missing
// from the live count are restarting after a crash and count as busy too:
// the rate is then per replica paid for. While a scale-up is pending, an
// interval over which the live count changed is skipped, as replicas that
// joined part-way would bias it.
func (c *Controller) observe(p schemas.Progress, r int) {
	s := &c.Mem
	c.watchStartup(p)
	busy := min(p.Replicas, p.InFlight)
	steady := s.Pending == nil
	if steady {
		busy += max(0, r-p.Replicas)
	}
	now := Mark{At: p.At, Finished: p.Done + p.Dead, Busy: busy, Live: p.Replicas, Steady: steady}
	if prev := s.Prev; prev != nil && (prev.Live == now.Live || (steady && prev.Steady)) {
		s.Measured = s.Measured || prev.Busy+now.Busy > 0
		dt := p.At.Sub(prev.At).Seconds()
		decay := math.Exp(-dt / c.Cfg.RateWindow.D().Seconds())
		items, busy := float64(max(0, now.Finished-prev.Finished)), dt*float64(prev.Busy+now.Busy)/2
		s.Items = s.Items*decay + items
		s.Busy = s.Busy*decay + busy
		recent := math.Exp(-dt / (c.Cfg.RateWindow.D().Seconds() / 4))
		s.RecentItems = s.RecentItems*recent + items
		s.RecentBusy = s.RecentBusy*recent + busy
		if s.RecentItems >= fewItems && s.RecentBusy > 0 && s.Items > 0 {
			// A change of pace (a slowdown, a faster phase): the long window
			// would follow it slowly; start again from the recent one.
			if ratio := (s.RecentItems / s.RecentBusy) / (s.Items / s.Busy); ratio > changeRatio || ratio < 1/changeRatio {
				s.Items, s.Busy, s.ChangedAt = s.RecentItems, s.RecentBusy, p.At
			}
		}
		if s.Learned == 0 && s.Items > 0 && c.Job.Expected > 0 {
			s.Learned = time.Duration(p.TimeProgress * float64(c.Job.Expected))
		}
	}
	s.Prev = &now
}

// rate is the per-replica throughput estimate and where it came from.
func (c *Controller) rate(p schemas.Progress) (float64, string) {
	switch {
	case c.Mem.Items > 0 && c.Mem.Busy > 0 && c.Mem.Measured:
		return c.Mem.Items / c.Mem.Busy, "measured"
	case c.Mem.Items > 0 && c.Mem.Busy > 0:
		return c.Mem.Items / c.Mem.Busy, c.Job.Basis
	case c.Cfg.PriorRate > 0:
		return c.Cfg.PriorRate, "prior_rate"
	}
	return 0, ""
}

// plan is a recommendation before smoothing.
type plan struct {
	want   float64 // replicas, real-valued
	why    string
	urgent bool // skip windows, dead-bands and limits
}

// Decide implements plugin.Controller.
func (c *Controller) Decide(p schemas.Progress) (schemas.Decision, error) {
	s := &c.Mem
	if !plugin.Fresh(p, s.LastAt) {
		return schemas.Decision{}, plugin.ErrStale
	}
	// The next decision is expected as far as the last two were apart: the
	// shorter of the last two gaps, so that one long pause (a restart, a lost
	// sample) does not count as the pace.
	gap := time.Duration(0)
	if !s.LastAt.IsZero() {
		gap = p.At.Sub(s.LastAt)
		if s.Gap > 0 {
			gap, s.Gap = min(gap, s.Gap), gap
		} else {
			s.Gap = gap
		}
	}
	s.LastAt = p.At
	r := plugin.Current(s.Replicas, p)
	c.observe(p, r)
	mu, src := c.rate(p)
	in := map[string]float64{"rate": mu, "error": p.Error, "live": float64(p.Replicas)}
	var pl plan
	if c.Job.Expected > 0 && p.Total > 0 {
		pl = c.batch(p, r, gap, mu, src, in)
	} else {
		pl = c.streaming(p, r, mu, src, in)
	}
	want, why := c.smooth(p.At, r, pl)
	n, bound := c.Job.ClampWhy(want, r)
	if n < 1 && (plugin.Remaining(p) > 0 || p.Backlog > 0) {
		n, bound = 1, plugin.Bounded(want, 1, r, "1 while work is left", "")
	}
	if bound != "" {
		why = bound // what the bounds made of the smoothed count, not what they overruled
	}
	if n > r {
		s.LastUpAt = p.At
		s.Pending = &ScaleUp{At: p.At, Base: p.Replicas, Target: n}
	}
	s.Replicas = n
	return schemas.Decision{
		Job: c.Job.Name, At: p.At, Replicas: n, Current: r, Controller: Name,
		Reason: fmt.Sprintf("%s; %s: %d", pl.why, why, n), Inputs: in,
	}, nil
}

func (c *Controller) batch(p schemas.Progress, r int, gap time.Duration, mu float64, src string, in map[string]float64) plan {
	rem := plugin.Remaining(p)
	left := plugin.TimeLeft(p, c.Job.Expected).Seconds()
	in["remaining"], in["time_left"] = float64(rem), left
	switch {
	case rem == 0:
		return plan{want: float64(c.Job.Min), why: "all items finished", urgent: true}
	case p.QueueLength == 0:
		busy := max(1, min(r, p.InFlight))
		return plan{want: float64(busy), urgent: true,
			why: fmt.Sprintf("queue empty, %d in flight: keep the busy replicas, release the idle ones", p.InFlight)}
	case mu <= 0:
		return plan{want: float64(r), why: fmt.Sprintf("%d items left, no throughput measured yet: hold", rem)}
	}
	d := c.startup().Seconds()
	// Lateness beyond what learning the rate explains: until the first rate
	// (or the first start-up, if later) no job can be on the diagonal.
	late := max(0, -p.Error-math.Max(d, c.Mem.Learned.Seconds())/c.Job.Expected.Seconds())
	slack := *c.Cfg.Margin + min(*c.Cfg.MaxCorrection, *c.Cfg.LatenessGain*late)
	t := left*(1-slack) - 1/mu
	need := float64(rem) / mu
	live := float64(p.Replicas)
	starting := float64(max(0, r-p.Replicas))
	startLeft := math.Max(0, c.Mem.LastUpAt.Add(c.startup()).Sub(p.At).Seconds())
	in["slack"], in["need"], in["starting"] = slack, need, starting
	head := fmt.Sprintf("%d items left at %.3g items/s per replica (%s), %.1fs to deadline, slack %.0f%%", rem, mu, src, left, slack*100)
	if g := gap.Seconds(); g > 0 && t > g {
		// The queue runs dry before the next decision: keep the replicas that
		// will take its items, the others finish the item they hold and exit.
		keep := max(1, schemas.ReplicasFor(float64(p.QueueLength), mu*g), schemas.ReplicasFor(need, t))
		if keep < r && float64(p.QueueLength) < live*mu*g {
			return plan{want: float64(keep), urgent: true, why: head + fmt.Sprintf(
				": %d queued items last %g live replicas less than %.0fs: keep %d to take them, the others finish their item and exit", p.QueueLength, live, g, keep)}
		}
	}
	switch {
	case t <= 0:
		return plan{want: float64(c.Job.Max), urgent: true, why: head + ": deadline reached, finish as fast as possible"}
	case live*t >= need && schemas.ReplicasFor(need, t) < r:
		// Busy replicas cost only the work they do, which is the same whoever
		// does it: releasing them early saves nothing and risks a start-up later.
		return plan{want: float64(r), why: head + fmt.Sprintf(": %.1f replica-seconds of work fit %.2f replicas, but busy replicas cost no more than their work: keep them until the queue drains", need, need/t)}
	case live*t >= need:
		return plan{want: need / t, why: head + fmt.Sprintf(": %.1f replica-seconds of work fit %.2f replicas", need, need/t)}
	case t <= d:
		return plan{want: float64(c.Job.Max), urgent: true,
			why: head + fmt.Sprintf(": new replicas need %.0fs to start, too late for the deadline; finish as fast as possible", d)}
	}
	extra := (need - live*t - starting*math.Max(0, t-startLeft)) / (t - d)
	if up := c.Mem.Pending; up != nil && up.Base > 0 && extra > 0 && r < c.Job.Max {
		// A scale-up is still starting: its replicas were sized on the rate
		// then; wait for them rather than chase a noisy estimate.
		return plan{want: float64(r), why: head + fmt.Sprintf(": %.1f replica-seconds of work, %g live, %g starting: wait for the starting replicas", need, live, starting)}
	}
	if want := live + starting + extra; want > float64(c.Job.Max) {
		return plan{want: float64(c.Job.Max), urgent: true,
			why: head + fmt.Sprintf(": %.1f replica-seconds of work need %.1f replicas, more than max %d: max at once for the least lateness", need, want, c.Job.Max)}
	}
	return plan{want: live + starting + math.Max(0, extra),
		why: head + fmt.Sprintf(": %.1f replica-seconds of work, %g live, %g starting, new ones lose %.0fs to start-up", need, live, starting, d)}
}

func (c *Controller) streaming(p schemas.Progress, r int, mu float64, src string, in map[string]float64) plan {
	in["input_rate"], in["backlog"] = p.InputRate, float64(p.Backlog)
	if mu <= 0 {
		return plan{want: float64(r), why: "streaming, no throughput measured yet: hold"}
	}
	catch := c.Cfg.CatchUp.D().Seconds()
	want := (p.InputRate + float64(p.Backlog)/catch) / mu
	return plan{want: want, why: fmt.Sprintf("streaming: (%.3g items/s in + %d backlog / %.0fs) / %.3g items/s per replica (%s) = %.2f",
		p.InputRate, p.Backlog, catch, mu, src, want)}
}

// smooth applies the stabilization windows, dead-bands and rate limits.
func (c *Controller) smooth(at time.Time, r int, pl plan) (int, string) {
	s := &c.Mem
	s.Recommendations = append(s.Recommendations, Point{at, pl.want})
	keep := max(c.Cfg.ScaleUpWindow.D(), c.Cfg.ScaleDownWindow.D())
	for len(s.Recommendations) > 1 && at.Sub(s.Recommendations[0].At) > keep {
		s.Recommendations = s.Recommendations[1:]
	}
	want := ceil(pl.want)
	if pl.urgent {
		return want, "now"
	}
	rf := float64(r)
	switch {
	case want > r:
		up := pl.want
		for _, rec := range s.Recommendations {
			if at.Sub(rec.At) <= c.Cfg.ScaleUpWindow.D() {
				up = math.Min(up, rec.Replicas)
			}
		}
		if up-rf <= *c.Cfg.ToleranceUp*rf || ceil(up) <= r {
			return r, "within the scale-up dead-band or window: hold"
		}
		limit := r + max(c.Cfg.MaxUpPods, ceil(rf*c.Cfg.MaxUpPercent/100))
		if ceil(up) > limit {
			return limit, fmt.Sprintf("scale up, limited to +%d", limit-r)
		}
		return ceil(up), "scale up"
	case want < r:
		down := pl.want
		for _, rec := range s.Recommendations {
			if at.Sub(rec.At) <= c.Cfg.ScaleDownWindow.D() {
				down = math.Max(down, rec.Replicas)
			}
		}
		if rf-down < *c.Cfg.ToleranceDown*rf || ceil(down) >= r {
			return r, fmt.Sprintf("scale-down within the dead-band or the %s window: hold", c.Cfg.ScaleDownWindow.D())
		}
		limit := r - max(1, ceil(rf*c.Cfg.MaxDownPercent/100))
		if ceil(down) < limit {
			return limit, fmt.Sprintf("scale down, limited to -%d", r-limit)
		}
		return ceil(down), "scale down"
	}
	return r, "hold"
}

// ceil rounds up, ignoring float noise below 1e-9.
func ceil(x float64) int { return int(math.Ceil(x - 1e-9)) }
