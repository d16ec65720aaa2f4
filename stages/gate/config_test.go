package gate_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate"
)

func TestConfigStoreMaintainsConcurrentlyAndReconfigures(t *testing.T) {
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	// Three instances maintain the empty bucket at once: every object is
	// created exactly once, and a second round changes nothing.
	var wg sync.WaitGroup
	counts := make([]int, 3)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := gate.OpenConfig(ctx, bustest.Client(t, s), log)
			if err != nil {
				t.Error(err)
				return
			}
			counts[i], err = st.Maintain(ctx)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	d := policy.Defaults()
	if total := counts[0] + counts[1] + counts[2]; total != len(d.FlowSchemas)+len(d.PriorityLevels) {
		t.Errorf("created %d objects in all (%v), want %d", total, counts, len(d.FlowSchemas)+len(d.PriorityLevels))
	}
	st, err := gate.OpenConfig(ctx, c, log)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := st.Maintain(ctx); n != 0 || err != nil {
		t.Errorf("second round: %d changes, %v", n, err)
	}

	// A running gate picks up a user's new schema from the bucket.
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), policy.Defaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx, g, policy.Objects{}) }()
	objs, err := policy.LoadFile("../../examples/flowcontrol/list-events-default-service-account.yaml")
	if err != nil {
		t.Fatal(err)
	}
	val, _ := json.Marshal(objs.FlowSchemas[0])
	kv, err := c.JetStream().KeyValue(ctx, c.Prefix().Bucket(schemas.BucketFlowControl))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, policy.FlowSchemaKey("list-events-default-service-account"), val); err != nil {
		t.Fatal(err)
	}
	sa := policy.Attributes{User: "system:serviceaccount:default:default", Groups: []string{"system:serviceaccounts", "system:authenticated"},
		IsResourceRequest: true, Verb: "list", Resource: "events", Namespace: "default"}
	bustest.Eventually(t, 5*time.Second, "gate reconfigured", func() bool {
		return g.Classify(sa).FlowSchema.Name == "list-events-default-service-account"
	})
	// Deleting a suggested object: the next maintenance restores it.
	if err := kv.Delete(ctx, policy.FlowSchemaKey("global-default")); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Maintain(ctx); n != 1 || err != nil {
		t.Errorf("restore: %d changes, %v; want 1", n, err)
	}
	e, err := kv.Get(ctx, policy.FlowSchemaKey("global-default"))
	if err != nil || !strings.Contains(string(e.Value()), `"apf.kubernetes.io/autoupdate-spec":"true"`) {
		t.Errorf("global-default not restored: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
