package bus_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
)

// provisionedStreams are the streams, buckets and object stores Provision makes.
var provisionedStreams = []string{"PACE_JOBS", "PACE_WORK", "PACE_RESULTS", "PACE_DEAD", "PACE_METRICS",
	"PACE_DECISIONS", "PACE_K8S", "PACE_K8S_OUTCOMES", "PACE_ADMISSION", "PACE_LOGS", "PACE_ADVISORIES",
	"KV_pace_jobs", "KV_pace_failures", "KV_pace_workers", "KV_pace_flowcontrol", "KV_pace_leases",
	"OBJ_pace_dead_letters"}

// checkReplicas fails unless every provisioned stream is configured with
// want replicas and, in time, placed on that many servers.
func checkReplicas(t *testing.T, ctx context.Context, c *bus.Client, want int) {
	t.Helper()
	for _, name := range provisionedStreams {
		st, err := c.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if got := st.CachedInfo().Config.Replicas; got != want {
			t.Errorf("%s: replicas = %d, want %d", name, got, want)
			continue
		}
		if want == 1 {
			continue
		}
		bustest.Eventually(t, 20*time.Second, name+" placed on every replica", func() bool {
			info, err := st.Info(ctx)
			return err == nil && info.Cluster != nil && len(info.Cluster.Replicas)+1 == want
		})
	}
}

func TestProvisionOnOneServerUsesOneReplica(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var logs syncBuffer
	c := bustest.Client(t, bustest.Server(t), bus.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	checkReplicas(t, ctx, c, 1)
	if out := logs.String(); !strings.Contains(out, "jetstream_servers_min=1 replicas=1 source=auto") {
		t.Errorf("detection not logged:\n%s", out)
	}
	if err := c.Provision(ctx, bus.Limits{Replicas: 3}); err == nil {
		t.Error("three replicas provisioned on one server")
	}
	if err := c.Provision(ctx, bus.Limits{Replicas: 6}); err == nil || !strings.Contains(err.Error(), "replicas 6") {
		t.Errorf("replicas 6: err = %v, want it named", err)
	}
}

func TestProvisionOnThreeServersUsesThreeReplicas(t *testing.T) {
	ctx := clusterCtx(t)
	var logs syncBuffer
	nodes := bustest.Cluster(t, 3)
	c := nodes.Client(bus.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	checkReplicas(t, ctx, c, 3)
	out := logs.String()
	if !strings.Contains(out, "cluster=pace jetstream_servers_min=3 replicas=3 source=auto") {
		t.Errorf("detection not logged:\n%s", out)
	}
	if _, err := c.JetStream().Stream(ctx, "PACE_PROBE"); err == nil {
		t.Error("the placement probe stream was left behind")
	}
	// Stages creating buckets of their own replicate them as the rest.
	if n, err := c.Replicas(ctx); err != nil || n != 3 {
		t.Errorf("Replicas() = %d, %v; want 3", n, err)
	}

	// With one server down three replicas cannot be placed; auto keeps R3.
	nodes.Stop(2)
	bustest.Eventually(t, time.Minute, "every stream led by a running server", func() bool {
		for _, name := range provisionedStreams {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.JetStream().Stream(rctx, name)
			cancel()
			if err != nil {
				return false
			}
		}
		return true
	})
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	checkReplicas(t, ctx, c, 3)
}

// clusterCtx bounds a cluster test: replicated streams take longer. Cluster
// tests do not run in parallel with the package's others: on a starved
// machine a lagging replica serves reads that miss the newest messages
// (an ordered consumer placed on it reports nothing pending), a known gap
// of stored reads (docs/bus.md).
func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A server lost while streams scale up is not tested: a stream whose new
// replicas are still catching up cannot elect a leader without it, and
// JetStream calls on it wait for their deadline until the server is back.
func TestProvisionScalesReplicasUp(t *testing.T) {
	ctx := clusterCtx(t)
	nodes := bustest.Cluster(t, 3)
	var logs syncBuffer
	c := nodes.Client(bus.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	// As if the bus had been provisioned before the cluster grew.
	if err := c.Provision(ctx, bus.Limits{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	checkReplicas(t, ctx, c, 1)
	if err := c.PushItems(ctx, "scale", bus.Items("a", "b")); err != nil {
		t.Fatal(err)
	}

	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	checkReplicas(t, ctx, c, 3)
	if !strings.Contains(logs.String(), "num_replicas") {
		t.Errorf("scaling not logged as drift:\n%s", logs.String())
	}
	// The job's work consumer follows its stream.
	cons, err := c.JetStream().Consumer(ctx, "PACE_WORK", "work-scale")
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 20*time.Second, "the work consumer on three servers", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.Cluster != nil && len(info.Cluster.Replicas) == 2
	})
}
