package bus_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestServerRefusesASecondResult plays a careless client with nats.go
// alone: a second result for an item, without the SDK's expected-sequence
// header or a message id, is refused by the NATS server, and the first one
// stays the item's only result. The SDK maps the refusal to
// ErrDuplicateResult.
func TestServerRefusesASecondResult(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := bustest.Server(t)
	c := bustest.Client(t, srv)
	_, js := bustest.Raw(t, srv.ClientURL())
	subject := c.Prefix().Results("j", "item-1")
	if _, err := js.Publish(ctx, subject, []byte(`{"first":true}`)); err != nil {
		t.Fatalf("first result: %v", err)
	}
	_, err := js.Publish(ctx, subject, []byte(`{"second":true}`))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Description, "maximum messages per subject") {
		t.Fatalf("second result: err = %v, want the server's refusal (maximum messages per subject exceeded)", err)
	}
	st, err := js.Stream(ctx, c.Prefix().Stream(schemas.StreamResults))
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != `{"first":true}` || m.Sequence != 1 {
		t.Errorf("stored result = %s (seq %d), want the first one", m.Data, m.Sequence)
	}

	// Pace's SDK gets its sentinel, whichever check refuses it.
	r := &schemas.Result{Job: "j", ItemID: "item-1", Output: "late", FinishedAt: time.Now()}
	if err := c.PublishResult(ctx, r); !errors.Is(err, bus.ErrDuplicateResult) {
		t.Errorf("PublishResult of a second result = %v, want ErrDuplicateResult", err)
	}
}

// TestProvisionMigratesTheResultsStream: a results stream of an older Pace
// (any number of messages per subject), holding a duplicate, gets the
// one-per-subject rule back from provisioning; the server keeps the newest
// of the two and refuses any further result on that subject.
func TestProvisionMigratesTheResultsStream(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	js := c.JetStream()
	name := c.Prefix().Stream(schemas.StreamResults)
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	old := st.CachedInfo().Config
	old.MaxMsgsPerSubject, old.DiscardNewPerSubject = 0, false
	if _, err := js.UpdateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	subject := c.Prefix().Results("j", "item-1")
	for _, body := range []string{`{"n":1}`, `{"n":2}`} {
		if _, err := js.Publish(ctx, subject, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	st, err = js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.CachedInfo().Config; cfg.MaxMsgsPerSubject != 1 || !cfg.DiscardNewPerSubject {
		t.Fatalf("after provisioning: max msgs per subject %d, discard new per subject %v; want 1, true",
			cfg.MaxMsgsPerSubject, cfg.DiscardNewPerSubject)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("%d results stored for one item after the migration, want 1", n)
	}
	if _, err := js.Publish(ctx, subject, []byte(`{"n":3}`)); err == nil {
		t.Error("a third result was stored after the migration")
	}
}
