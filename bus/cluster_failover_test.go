package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestClusterKeepsWorkFlowingWhenAServerStops stops the server a worker is
// connected to while it works through a job, then restarts it.
func TestClusterKeepsWorkFlowingWhenAServerStops(t *testing.T) {
	ctx := clusterCtx(t)
	nodes := bustest.Cluster(t, 3)
	c := nodes.Client()
	const job, n, victim = "failover", 1000, 0
	declare(t, ctx, c, job, 2*time.Second, 5)
	items := manyItems(n)
	if err := c.PushItems(ctx, job, items); err != nil {
		t.Fatal(err)
	}

	wc, err := bus.Connect(ctx, nodes.URL(victim), bus.WithName("worker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wc.Close(context.Background()) })
	w, err := wc.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return it.Payload, nil
	}, bus.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	bustest.Eventually(t, time.Minute, "100 items processed before the stop", func() bool {
		return w.Stats().Processed >= 100
	})
	nodes.Stop(victim)

	// The worker learnt the other servers from the first one and moved on.
	reader, err := bus.Connect(ctx, nodes.URL(1)+","+nodes.URL(2), bus.WithName("reader"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reader.Close(context.Background()) })
	checkExactlyOnce(t, items, readResults(t, ctx, reader, job))
	if got := wc.Conn().ConnectedServerName(); got == "nats-1" || got == "" {
		t.Errorf("worker connected to %q after nats-1 stopped", got)
	}

	nodes.Restart(victim)
	st, err := reader.JetStream().Stream(ctx, "PACE_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, time.Minute, "nats-1 current again on the results stream", func() bool {
		info, err := st.Info(ctx)
		if err != nil || info.Cluster == nil {
			return false
		}
		peers := append([]*jetstream.PeerInfo{{Name: info.Cluster.Leader, Current: true}}, info.Cluster.Replicas...)
		for _, p := range peers {
			if p.Name == "nats-1" && p.Current && !p.Offline {
				return true
			}
		}
		return false
	})
}
