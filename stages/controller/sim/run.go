package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Point is one monitor sample of a run.
type Point struct {
	T            float64 `json:"t"`
	JobProgress  float64 `json:"job_progress"`
	TimeProgress float64 `json:"time_progress"`
	Error        float64 `json:"error"`
	// Replicas are live workers; Desired the count last asked for.
	Replicas int `json:"replicas"`
	Desired  int `json:"desired"`
	Done     int `json:"done"`
	Queue    int `json:"queue"`
}

// DecisionPoint is a decision that changed the desired replicas.
type DecisionPoint struct {
	T        float64 `json:"t"`
	Replicas int     `json:"replicas"`
	Reason   string  `json:"reason"`
}

// Result summarizes one scenario run with one controller. Times are seconds.
type Result struct {
	Scenario   string          `json:"scenario"`
	Controller string          `json:"controller"`
	Mode       schemas.JobMode `json:"mode"`
	// Finished is true when every batch item was done within the horizon.
	Finished bool    `json:"finished"`
	Finish   float64 `json:"finish_s,omitempty"`
	Deadline float64 `json:"deadline_s,omitempty"`
	// Met: the deadline (batch) or the p99 latency target (streaming) was met.
	Met      bool    `json:"met"`
	Lateness float64 `json:"lateness_s"`
	// ReplicaSeconds is the sum of every replica's lifetime, start-up included.
	ReplicaSeconds float64 `json:"replica_seconds"`
	// CrashSeconds is the part of ReplicaSeconds lost to crashes: the crashed
	// attempts and the restarts. The oracle meets the same crashes.
	CrashSeconds float64 `json:"crash_seconds,omitempty"`
	// Oracle is the least replica-seconds meeting the deadline with perfect
	// knowledge (batch); Feasible whether that deadline can be met at all.
	Oracle         float64 `json:"oracle_replica_seconds,omitempty"`
	Feasible       bool    `json:"feasible"`
	CostVsOracle   float64 `json:"cost_vs_oracle,omitempty"`
	ScalingActions int     `json:"scaling_actions"`
	PeakReplicas   int     `json:"peak_replicas"`
	Redeliveries   int     `json:"redeliveries"`
	// LatencyP99 is the items' p99 time from arrival to done (streaming).
	LatencyP99 float64 `json:"latency_p99_s,omitempty"`
	// Tuning is the parameter set the tuned yardstick chose (RunTuned), and
	// Forecast whether it started with the forecast of its training draws.
	Tuning    string          `json:"tuning,omitempty"`
	Forecast  bool            `json:"forecast,omitempty"`
	Series    []Point         `json:"series,omitempty"`
	Decisions []DecisionPoint `json:"decisions,omitempty"`
}

// Run simulates s with the controller called name from reg, its parameters
// taken from s.Controllers[name]. With s.Repeat > 1 the job runs that many
// times (seeds Seed, Seed+1, …): costs and actions add up, the deadline is met
// only if every run met it, lateness is the worst; the series is the first run's.
// Each run after the first gets the forecast the manager would make from the
// runs before it, as jobs of the same program do (stages/manager/predict.go).
func Run(s Scenario, reg plugin.Registry, name string) (Result, error) {
	return runWith(s, reg, name, &history{})
}

// RunLater simulates s as a later job of its program, as Pace runs every
// job after a program's first: admission forecasts its item time and
// start-up from the history of the program's earlier jobs (the manager's
// bucket pace_item_times), which here are trainingDraws other draws of s
// (seeds 1000, 2000, … apart) run with the deadline controller at its
// defaults. Streaming scenarios have no forecast: RunLater is Run.
func RunLater(s Scenario, reg plugin.Registry, name string) (Result, error) {
	h, err := programHistory(s, reg)
	if err != nil {
		return Result{}, err
	}
	return runWith(s, reg, name, &h)
}

// programHistory is what the manager has learned of s's program before s's
// job: the history of trainingDraws other draws of s, each run with the
// deadline controller at its defaults and the history of those before it.
func programHistory(s Scenario, reg plugin.Registry) (history, error) {
	var h history
	if s.Mode != schemas.Batch {
		return h, nil
	}
	for k := range trainingDraws {
		d := s
		d.Seed = s.Seed + 1000*uint64(k+1)
		d.Controllers = map[string]json.RawMessage{"deadline": json.RawMessage("{}")}
		if _, err := runWith(d, reg, "deadline", &h); err != nil {
			return history{}, err
		}
	}
	return h, nil
}

// runWith is Run with the history of earlier jobs of the program h, which
// the runs add to.
func runWith(s Scenario, reg plugin.Registry, name string, h *history) (Result, error) {
	res := Result{Scenario: s.Name, Controller: name, Mode: s.Mode, Met: true, Finished: true, Feasible: true}
	for i := range s.Repeat {
		seed := s.Seed + uint64(i)
		ctrl, err := reg.New(name, h.forecast(job(s)), s.Controllers[name])
		if err != nil {
			return Result{}, fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		one, err := runOnce(s, ctrl, seed, h)
		if err != nil {
			return Result{}, fmt.Errorf("scenario %s, controller %s: %w", s.Name, name, err)
		}
		res.merge(one, i == 0)
	}
	if res.Oracle > 0 {
		res.CostVsOracle = round6(res.ReplicaSeconds / res.Oracle)
	}
	return res, nil
}

// RunStatic simulates s at a fixed replica count (a step experiment).
func RunStatic(s Scenario, replicas int) (Result, error) {
	s.Replicas = schemas.Replicas{Min: replicas, Max: replicas, Initial: replicas}
	s.Repeat = 1
	one, err := runOnce(s, static(replicas), s.Seed, &history{})
	if err != nil {
		return Result{}, err
	}
	res := Result{Scenario: s.Name, Controller: fmt.Sprintf("static-%d", replicas), Mode: s.Mode, Met: true, Finished: true, Feasible: true}
	res.merge(one, true)
	return res, nil
}

func job(s Scenario) plugin.Job {
	j := plugin.Job{Name: "sim", Min: s.Replicas.Min, Max: s.Replicas.Max, Initial: s.Replicas.Initial}
	if s.Mode == schemas.Batch {
		j.Expected = s.Deadline.D()
	}
	return j
}

func runOnce(s Scenario, ctrl plugin.Controller, seed uint64, h *history) (Result, error) {
	e := newEngine(s, ctrl, seed)
	if err := e.run(); err != nil {
		return Result{}, err
	}
	h.learn(e)
	r := Result{
		ReplicaSeconds: e.replicaTime.Seconds(), CrashSeconds: e.crashTime.Seconds(), ScalingActions: e.actions, PeakReplicas: e.peak,
		Redeliveries: e.redelivered, Series: e.series, Decisions: e.decisions, Finished: true, Feasible: true,
	}
	if s.Mode == schemas.Batch {
		r.Deadline = s.Deadline.D().Seconds()
		r.Finished = e.done == len(e.svc)
		r.Finish = e.now.Seconds()
		r.Lateness = math.Max(0, r.Finish-r.Deadline)
		r.Met = r.Finished && r.Lateness == 0
		o := oracle(s, itemTimes(s, seed), seed)
		r.Oracle, r.Feasible = o.ReplicaSeconds, o.Feasible
		return r, nil
	}
	lat := e.latencies
	for _, i := range e.queue {
		lat = append(lat, (e.now - e.arrived[i]).Seconds())
	}
	r.LatencyP99 = p99(lat)
	r.Met = r.LatencyP99 <= s.LatencyTarget.D().Seconds()
	r.Lateness = math.Max(0, r.LatencyP99-s.LatencyTarget.D().Seconds())
	return r, nil
}

func (r *Result) merge(o Result, first bool) {
	if first {
		r.Series, r.Decisions, r.Finish, r.Deadline, r.LatencyP99 = o.Series, o.Decisions, o.Finish, o.Deadline, o.LatencyP99
	}
	r.Finished = r.Finished && o.Finished
	r.Met = r.Met && o.Met
	r.Feasible = r.Feasible && o.Feasible
	r.Lateness = math.Max(r.Lateness, o.Lateness)
	r.LatencyP99 = math.Max(r.LatencyP99, o.LatencyP99)
	r.ReplicaSeconds = round6(r.ReplicaSeconds + o.ReplicaSeconds)
	r.CrashSeconds = round6(r.CrashSeconds + o.CrashSeconds)
	r.Oracle = round6(r.Oracle + o.Oracle)
	r.ScalingActions += o.ScalingActions
	r.PeakReplicas = max(r.PeakReplicas, o.PeakReplicas)
	r.Redeliveries += o.Redeliveries
	r.Finish, r.Lateness = round6(r.Finish), round6(r.Lateness)
}

// history is what the manager learns from the finished runs of one program:
// the mean item time and the mean start-up, from the start to the first
// result less one item time.
type history struct {
	items, runs           int
	itemSeconds, startups float64
}

// learn adds a finished batch run to h.
func (h *history) learn(e *engine) {
	if e.s.Mode != schemas.Batch || e.done == 0 {
		return
	}
	mean := e.doneTime.Seconds() / float64(e.done)
	h.itemSeconds = (h.itemSeconds*float64(h.items) + e.doneTime.Seconds()) / float64(h.items+e.done)
	h.startups += math.Max(0, e.firstDone.Seconds()-mean)
	h.items += e.done
	h.runs++
}

// forecast adds h's forecast to j, if h has one.
func (h *history) forecast(j plugin.Job) plugin.Job {
	if h.items > 0 {
		j.ItemTime = time.Duration(h.itemSeconds * float64(time.Second))
		j.Startup = time.Duration(h.startups / float64(h.runs) * float64(time.Second))
		j.Basis, j.Samples = schemas.BasisHistory, h.items
	}
	return j
}

// staticCtrl always asks for the same count.
type staticCtrl int

func static(n int) plugin.Controller { return staticCtrl(n) }

func (c staticCtrl) Decide(p schemas.Progress) (schemas.Decision, error) {
	return schemas.Decision{Job: p.Job, At: p.At, Replicas: int(c), Current: p.Replicas, Reason: "static"}, nil
}
func (staticCtrl) State() (json.RawMessage, error) { return json.RawMessage("{}"), nil }
func (staticCtrl) Restore(json.RawMessage) error   { return nil }
