package actuator

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// A request published again (a retry after a lost acknowledgement) is
// stored once: its id is its message id.
func TestRequestPublishedTwiceIsStoredOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	s, err := New(Deps{Bus: c}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &schemas.JobRecord{ID: "j", Spec: schemas.JobSpec{Owner: "alice"}}
	for range 2 {
		req := &schemas.KubeRequest{ID: "req-1", Verb: "patch", Subresource: "scale", Replicas: 2}
		if err := s.publish(ctx, rec, req, "test"); err != nil {
			t.Fatal(err)
		}
	}
	other := &schemas.KubeRequest{ID: "req-2", Verb: "patch", Subresource: "scale", Replicas: 3}
	if err := s.publish(ctx, rec, other, "test"); err != nil {
		t.Fatal(err)
	}
	st, err := c.JetStream().Stream(ctx, c.Prefix().Stream("K8S"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("%d requests stored, want 2 (req-1 once, req-2)", info.State.Msgs)
	}
}

// A request is stamped with the stage's clock.
func TestRequestIsStampedByTheStagesClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := bustest.Client(t, bustest.Server(t))
	s, err := New(Deps{Bus: c}, Config{}, WithClock(clocktesting.NewFakeClock(at)))
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.KubeRequest{Verb: "patch", Subresource: "scale", Replicas: 1}
	if err := s.publish(context.Background(), &schemas.JobRecord{ID: "j"}, req, "test"); err != nil {
		t.Fatal(err)
	}
	if !req.At.Equal(at) {
		t.Errorf("request at %s, want the clock's %s", req.At, at)
	}
}
