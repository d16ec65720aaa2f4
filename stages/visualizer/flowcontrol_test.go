package visualizer_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/borrowing"
	"github.com/pace-platform/pace/flowcontrol/queueset"
	"github.com/pace-platform/pace/flowcontrol/work"
	"github.com/pace-platform/pace/stages/visualizer"
)

// fakeFC is a FlowControl whose dump the test sets.
type fakeFC struct {
	mu   sync.Mutex
	dump []flowcontrol.LevelDump
}

func (f *fakeFC) Dump() []flowcontrol.LevelDump {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dump
}

func (f *fakeFC) set(d []flowcontrol.LevelDump) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dump = d
}

func rq(schema, flow string, seats int) queueset.RequestDump {
	return queueset.RequestDump{FlowSchema: schema, Label: flow, Estimate: work.Estimate{InitialSeats: seats}}
}

func TestFlowControlPageShowsLevelsAndTopFlows(t *testing.T) {
	t.Parallel()
	fc := &fakeFC{}
	fc.set([]flowcontrol.LevelDump{{Name: "workload-low", Limits: borrowing.Limits{Nominal: 10, Min: 5, Max: 20}, CurrentLimit: 12,
		QueueSet: queueset.Dump{SeatsInUse: 3, Executing: 2, Waiting: 1, Rejected: 4, TimedOut: 1, Dispatched: 9,
			Queues: []queueset.QueueDump{{Executing: []queueset.RequestDump{rq("pace-jobs", "alice", 2), rq("pace-jobs", "bob", 1)},
				Waiting: []queueset.RequestDump{rq("pace-jobs", "alice", 1)}}}}}})
	e := newEnv(t, func(s *visualizer.Stage, _ *bus.Client) { s.SetFlowControl(fc) })

	if code, _ := e.events("/ui/events/flowcontrol", "alice-token"); code != http.StatusForbidden {
		t.Errorf("alice (not an admin): %d, want 403", code)
	}
	code, ch := e.events("/ui/events/flowcontrol", "root-token")
	if code != http.StatusOK {
		t.Fatalf("admin: %d", code)
	}
	view := next(t, ch, "levels", func(*visualizer.FlowControlView) bool { return true })
	if len(view.Processes) != 1 || len(view.Missing) != 0 {
		t.Fatalf("view = %+v, want this process alone", view)
	}
	v := view.Processes[0]
	want := visualizer.Level{Name: "workload-low", Nominal: 10, Current: 12, Min: 5, Max: 20, SeatsInUse: 3, Executing: 2,
		Waiting: 1, Dispatched: 9, Rejected: 4, TimedOut: 1}
	if len(v.Levels) != 1 || v.Levels[0] != want {
		t.Errorf("levels = %+v, want %+v", v.Levels, want)
	}
	if len(v.Flows) != 2 || v.Flows[0].Flow != "alice" || v.Flows[0].Seats != 2 || v.Flows[0].Waiting != 1 || v.Flows[1].Flow != "bob" {
		t.Errorf("flows = %+v, want alice (2 seats, 1 waiting) then bob", v.Flows)
	}

	// A change is streamed.
	fc.set([]flowcontrol.LevelDump{{Name: "workload-low", QueueSet: queueset.Dump{Rejected: 5}}})
	next(t, ch, "more rejections", func(v *visualizer.FlowControlView) bool {
		p := v.Processes[0]
		return len(p.Levels) == 1 && p.Levels[0].Rejected == 5 && len(p.Flows) == 0
	})
}
