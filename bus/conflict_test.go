package bus_test

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestConflictOnOneAndThreeReplicas provokes every kind of lost race the bus
// relies on, on a single server (streams of one replica, error code 10071)
// and on a three-server cluster (three replicas, code 10164), and requires
// Conflict to recognise each; then PublishResult must report a second
// result as a duplicate, and concurrent Update calls must all apply.
func TestConflictOnOneAndThreeReplicas(t *testing.T) {
	clients := map[string]func(t *testing.T) *bus.Client{
		"one server": func(t *testing.T) *bus.Client { return bustest.Client(t, bustest.Server(t)) },
		"cluster":    func(t *testing.T) *bus.Client { return bustest.Cluster(t, 3).Client() },
	}
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			ctx := clusterCtx(t)
			c := client(t)
			kv, err := c.JetStream().KeyValue(ctx, c.Prefix().Bucket("failures"))
			if err != nil {
				t.Fatal(err)
			}
			rev, err := kv.Create(ctx, "k", []byte("1"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Update(ctx, "k", []byte("2"), rev); err != nil {
				t.Fatal(err)
			}
			_, createErr := kv.Create(ctx, "k", []byte("3"))
			_, updateErr := kv.Update(ctx, "k", []byte("3"), rev)
			deleteErr := kv.Delete(ctx, "k", jetstream.LastRevision(rev))
			subject := c.Prefix().Results("conflict", "raw")
			if _, err := c.JetStream().PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte("first")}, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
				t.Fatal(err)
			}
			_, publishErr := c.JetStream().PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte("second")}, jetstream.WithExpectLastSequencePerSubject(0))
			for what, err := range map[string]error{"create": createErr, "update": updateErr, "delete": deleteErr, "publish": publishErr} {
				if !bus.Conflict(err) {
					t.Errorf("%s on a stale revision: %v, not a Conflict", what, err)
				}
			}
			if bus.Conflict(nil) || bus.Conflict(errors.New("other")) || bus.Conflict(jetstream.ErrKeyNotFound) {
				t.Error("Conflict holds for an error that is none")
			}

			// A second result with another message id is refused by the
			// expected last sequence, not by de-duplication.
			if _, err := c.JetStream().PublishMsg(ctx, &nats.Msg{Subject: c.Prefix().Results("conflict", "i1"), Data: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
			if err := c.PublishResult(ctx, &schemas.Result{Job: "conflict", ItemID: "i1", Output: "late"}); !errors.Is(err, bus.ErrDuplicateResult) {
				t.Errorf("a second result: %v, want ErrDuplicateResult", err)
			}

			if _, err := c.DeclareJob(ctx, "cas", schemas.JobSpec{Mode: schemas.Streaming}); err != nil {
				t.Fatal(err)
			}
			const writers = 8
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for i := range writers {
				wg.Go(func() {
					_, err := c.Jobs().Update(ctx, "cas", func(cur *schemas.JobRecord) (*schemas.JobRecord, error) {
						next := *cur
						next.Spec.Labels = maps.Clone(cur.Spec.Labels)
						if next.Spec.Labels == nil {
							next.Spec.Labels = map[string]string{}
						}
						next.Spec.Labels[fmt.Sprintf("w%d", i)] = "x"
						return &next, nil
					})
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("concurrent UpdateJob: %v", err)
				}
			}
			rec, _, err := c.Jobs().Get(ctx, "cas")
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Spec.Labels) != writers {
				t.Errorf("labels after %d concurrent updates: %v", writers, rec.Spec.Labels)
			}
		})
	}
}
