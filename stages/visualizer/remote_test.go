package visualizer_test

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"testing"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/queueset"
	"github.com/pace-platform/pace/stages/visualizer"
)

var _ visualizer.FlowControl = (*apf.Gate)(nil)

// serve answers flow-control requests as stage's replica over a connection
// of its own, as a separate process would, until the returned stop.
func serve(t *testing.T, srv *bus.Server, stage, replica string, fc visualizer.FlowControl) (stop func()) {
	t.Helper()
	c := bustest.Client(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- visualizer.ServeFlowControl(ctx, c, stage, replica, fc, slog.New(slog.DiscardHandler)) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s %s: %v", stage, replica, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func names(v *visualizer.FlowControlView) []string {
	var out []string
	for _, p := range v.Processes {
		out = append(out, p.Stage+"/"+p.Replica)
	}
	return out
}

// TestRemoteFlowControlGathersEveryProcess runs the page as pace stage
// visualizer does: the gate's leader and two manager replicas answer over
// a real NATS server, each labelled; the page says which stage is silent.
func TestRemoteFlowControlGathersEveryProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *visualizer.Stage, c *bus.Client) { s.SetRemoteFlowControl(c) })
	if code, _ := e.events("/ui/events/flowcontrol", "alice-token"); code != http.StatusForbidden {
		t.Errorf("alice (not an admin): %d, want 403", code)
	}
	_, ch := e.events("/ui/events/flowcontrol", "root-token")
	none := next(t, ch, "no answer", func(*visualizer.FlowControlView) bool { return true })
	if len(none.Processes) != 0 || !slices.Equal(none.Missing, []string{"gate", "manager"}) {
		t.Errorf("with no responder: %+v, want no process, gate and manager missing", none)
	}

	gate := &fakeFC{}
	gate.set([]flowcontrol.LevelDump{{Name: "workload-low", QueueSet: queueset.Dump{SeatsInUse: 2, Executing: 1, Dispatched: 7,
		Queues: []queueset.QueueDump{{Executing: []queueset.RequestDump{rq("pace-actuator", "pace-actuator", 2)}}}}}})
	stopGate := serve(t, e.srv, "gate", "gate-0", gate)
	for _, replica := range []string{"manager-1", "manager-0"} {
		g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), policy.Defaults(), nil)
		if err != nil {
			t.Fatal(err)
		}
		serve(t, e.srv, "manager", replica, g)
	}
	want := []string{"gate/gate-0", "manager/manager-0", "manager/manager-1"}
	all := next(t, ch, "three answers", func(v *visualizer.FlowControlView) bool { return slices.Equal(names(v), want) })
	if len(all.Missing) != 0 {
		t.Errorf("missing %v with every stage answering", all.Missing)
	}
	g := all.Processes[0]
	if len(g.Levels) != 1 || g.Levels[0].Dispatched != 7 || len(g.Flows) != 1 || g.Flows[0].Flow != "pace-actuator" || g.Flows[0].Seats != 2 {
		t.Errorf("gate's answer = %+v, want workload-low with pace-actuator's 2 seats", g)
	}
	for _, m := range all.Processes[1:] {
		if !slices.ContainsFunc(m.Levels, func(l visualizer.Level) bool { return l.Name == "exempt" }) {
			t.Errorf("%s's levels %+v lack the mandatory exempt level", m.Replica, m.Levels)
		}
	}

	// A change in one process is streamed; a silent gate is reported.
	gate.set([]flowcontrol.LevelDump{{Name: "workload-low", QueueSet: queueset.Dump{Rejected: 3}}})
	next(t, ch, "the gate's rejections", func(v *visualizer.FlowControlView) bool {
		return len(v.Processes) == 3 && len(v.Processes[0].Levels) == 1 && v.Processes[0].Levels[0].Rejected == 3
	})
	stopGate()
	next(t, ch, "the gate missing", func(v *visualizer.FlowControlView) bool {
		return slices.Equal(names(v), want[1:]) && slices.Equal(v.Missing, []string{"gate"})
	})
}
