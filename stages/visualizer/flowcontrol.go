package visualizer

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/queueset"
)

// FlowControl dumps API Priority and Fairness' levels; *apf.Gate implements it.
type FlowControl interface {
	Dump() []flowcontrol.LevelDump
}

// maxFlows bounds the flows listed on the flow-control page.
const maxFlows = 10

// SetFlowControl adds the flow-control page, fed by fc. Call it before Register.
func (s *Server) SetFlowControl(fc FlowControl) { s.fc = fc }

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

// FlowControlView is the flow-control page's data.
type FlowControlView struct {
	Levels []Level `json:"levels"`
	Flows  []Flow  `json:"flows"`
}

func flowControlView(dump []flowcontrol.LevelDump) *FlowControlView {
	v := &FlowControlView{Levels: []Level{}, Flows: []Flow{}}
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
func (s *Server) flowControlEvents(w http.ResponseWriter, r *http.Request) {
	if s.fc == nil {
		http.NotFound(w, r)
		return
	}
	if u := user(r); !s.cfg.Open && !u.IsAdmin() {
		writeError(w, errForbidden)
		return
	}
	st, ok := startStream(w)
	if !ok {
		return
	}
	s.loop(r.Context(), st, nil, "flowcontrol", flowControlView(s.fc.Dump()), func() (any, error) {
		return flowControlView(s.fc.Dump()), nil
	})
}
