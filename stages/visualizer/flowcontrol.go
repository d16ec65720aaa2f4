package visualizer

import (
	"cmp"
	"context"
	"net/http"
	"slices"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/queueset"
)

// FlowControl dumps API Priority and Fairness' levels; *apf.Gate implements it.
type FlowControl interface {
	Dump() []flowcontrol.LevelDump
}

// maxFlows bounds the flows listed per process on the flow-control page.
const maxFlows = 10

// SetFlowControl adds the flow-control page, fed by fc: the APF of this
// process (pace up, whose job API and gate share it). Call it before
// Register. [Server.SetRemoteFlowControl] is its distributed counterpart.
func (s *Stage) SetFlowControl(fc FlowControl) {
	s.fcView = func(context.Context) (*FlowControlView, error) {
		return &FlowControlView{Processes: []ProcessFlowControl{processView(fc.Dump())}}, nil
	}
}

// Level is one priority level on the flow-control page.
type Level struct {
	Name         string `json:"name"`
	Lingering    bool   `json:"lingering,omitempty"`
	Nominal      int    `json:"nominal"`
	Current      int    `json:"current"`
	Min          int    `json:"min"`
	Max          int    `json:"max"`
	SeatsInUse   int    `json:"seats_in_use"`
	Executing    int    `json:"executing"`
	Waiting      int    `json:"waiting"`
	SeatsWaiting int    `json:"seats_waiting"`
	Dispatched   int    `json:"dispatched"`
	Rejected     int    `json:"rejected"`
	TimedOut     int    `json:"timed_out"`
}

// Flow is one flow (flow schema and distinguisher) with requests in a level.
type Flow struct {
	Level      string `json:"level"`
	FlowSchema string `json:"flow_schema"`
	Flow       string `json:"flow"`
	Executing  int    `json:"executing"`
	Waiting    int    `json:"waiting"`
	Seats      int    `json:"seats"`
}

// ProcessFlowControl is the APF state of one process: its priority levels
// and its top flows. It is also a process's answer on
// its prefix's FlowControlDump subject.
type ProcessFlowControl struct {
	// Stage is "gate" or "manager"; empty in pace up, whose job API and
	// gate share one APF.
	Stage string `json:"stage,omitempty"`
	// Replica is the process's identity (pace stage --identity).
	Replica string  `json:"replica,omitempty"`
	Levels  []Level `json:"levels"`
	Flows   []Flow  `json:"flows"`
}

// FlowControlView is the flow-control page's data: the APF state of every
// process holding one, ordered by stage and replica.
type FlowControlView struct {
	Processes []ProcessFlowControl `json:"processes"`
	// Missing names the stages that hold APF state but did not answer
	// ("gate", "manager"); always empty in pace up.
	Missing []string `json:"missing,omitempty"`
}

// processView summarises one process's dump: every level and its
// maxFlows flows holding the most seats or waiting.
func processView(dump []flowcontrol.LevelDump) ProcessFlowControl {
	v := ProcessFlowControl{Levels: []Level{}, Flows: []Flow{}}
	flows := map[[3]string]*Flow{}
	add := func(level string, rq queueset.RequestDump, executing bool) {
		k := [3]string{level, rq.FlowSchema, rq.Label}
		f := flows[k]
		if f == nil {
			f = &Flow{Level: level, FlowSchema: rq.FlowSchema, Flow: rq.Label}
			flows[k] = f
		}
		if executing {
			f.Executing++
			f.Seats += rq.Estimate.InitialSeats
		} else {
			f.Waiting++
		}
	}
	for _, l := range dump {
		qs := l.QueueSet
		v.Levels = append(v.Levels, Level{Name: l.Name, Lingering: l.Lingering, Nominal: l.Limits.Nominal, Current: l.CurrentLimit,
			Min: l.Limits.Min, Max: l.Limits.Max, SeatsInUse: qs.SeatsInUse, Executing: qs.Executing, Waiting: qs.Waiting,
			SeatsWaiting: qs.SeatsWaiting, Dispatched: qs.Dispatched, Rejected: qs.Rejected, TimedOut: qs.TimedOut})
		for _, q := range qs.Queues {
			for _, rq := range q.Waiting {
				add(l.Name, rq, false)
			}
			for _, rq := range q.Executing {
				add(l.Name, rq, true)
			}
		}
		for _, rq := range qs.QueuelessExecuting {
			add(l.Name, rq, true)
		}
	}
	for _, f := range flows {
		v.Flows = append(v.Flows, *f)
	}
	slices.SortFunc(v.Flows, func(a, b Flow) int {
		return cmp.Or(cmp.Compare(b.Seats+b.Waiting, a.Seats+a.Waiting), cmp.Compare(a.Level, b.Level),
			cmp.Compare(a.FlowSchema, b.FlowSchema), cmp.Compare(a.Flow, b.Flow))
	})
	if len(v.Flows) > maxFlows {
		v.Flows = v.Flows[:maxFlows]
	}
	return v
}

// flowControlEvents streams the flow-control page to admins (to anyone
// when Config.Open): a "flowcontrol" event when it changes.
func (s *Stage) flowControlEvents(w http.ResponseWriter, r *http.Request) {
	if s.fcView == nil {
		http.NotFound(w, r)
		return
	}
	u, release, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer release()
	if !s.cfg.Open && !u.IsAdmin() {
		writeError(w, errForbidden)
		return
	}
	ctx := r.Context()
	v, err := s.fcView(ctx)
	if err != nil {
		writeError(w, err)
		return
	}
	st, ok := startStream(w)
	if !ok {
		return
	}
	s.loop(ctx, st, nil, "flowcontrol", v, func() (any, error) { return s.fcView(ctx) })
}
