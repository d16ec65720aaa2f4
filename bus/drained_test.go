package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
)

// A message the server delivers as a fetch's wait ends reaches no one, and
// its consumer counts it as delivered: a read that asked the consumer's
// pending count alone took itself for done without the message (seen as
// "letters of never-created = []" under load). Drained tells it apart.
func TestAReadIsNotDoneWithAMessageDeliveredToNoOne(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	nc, js := bustest.Raw(t, "", bustest.Server(t).InProcess())
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"a", "b"} {
		if _, err := js.Publish(ctx, subject, nil); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{Name: "r", FilterSubject: "a", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	if done, missed, err := bus.Drained(ctx, cons, 0); done || missed || err != nil {
		t.Fatalf("before any fetch: drained %v, missed %v, %v; want neither", done, missed, err)
	}
	// A pull request whose delivery the read never sees, as a fetch that
	// gave up: its inbox takes the message and drops it.
	lost, err := nc.SubscribeSync("lost.inbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.S.r", "lost.inbox", []byte(`{"batch":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := lost.NextMsg(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = lost.Unsubscribe()
	// Nothing is pending any more: the consumer's count alone says done.
	done, missed, err := bus.Drained(ctx, cons, 0)
	if done || !missed || err != nil {
		t.Fatalf("a message delivered to no one: drained %v, missed %v, %v; want missed, not drained", done, missed, err)
	}
	if done, missed, err := bus.Drained(ctx, cons, 1); !done || missed || err != nil {
		t.Fatalf("with the delivery seen: drained %v, missed %v, %v; want drained", done, missed, err)
	}
}
