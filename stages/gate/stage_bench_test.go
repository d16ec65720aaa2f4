package gate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate"
)

// BenchmarkStageThroughput measures the bus gate stage end to end on an
// embedded server: b.N scale requests of Pace's controller, published at
// once, each consumed, admitted through the default policy, run by an
// actuator that answers at once, its admission event and outcome
// published and the request acked.
func BenchmarkStageThroughput(b *testing.B) {
	ctx := context.Background()
	c := bustest.Client(b, bustest.Server(b))
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), policy.Defaults(), nil)
	if err != nil {
		b.Fatal(err)
	}
	var applied atomic.Int64
	done := make(chan struct{})
	act := gate.ActuatorFunc(func(_ context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error) {
		if applied.Add(1) == int64(b.N) {
			close(done)
		}
		return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Applied, Replicas: req.Replicas, At: time.Now()}, nil
	})
	st, err := gate.New(gate.Deps{Bus: c, Gate: g, Actuator: act}, gate.Config{})
	if err != nil {
		b.Fatal(err)
	}
	js := c.JetStream()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m, err := bus.NewMsg(ctx, c.Prefix().KubeRequests(), &schemas.KubeRequest{ID: fmt.Sprintf("r%d", i), Job: "j", User: "pace-controller",
			Groups: []string{policy.ComponentsGroup}, Verb: "patch", APIGroup: "apps", Resource: "deployments",
			Subresource: "scale", Namespace: "ns", Name: "w", Replicas: 3, At: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		m.Header.Set(schemas.HeaderMsgID, fmt.Sprintf("r%d", i))
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	rctx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- st.Run(rctx) }()
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	stop()
	if err := <-stopped; err != nil {
		b.Fatal(err)
	}
}
