package pubsub_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/pubsub"
)

// jetStream connects to a real embedded server and creates the stream
// testStream, which holds the subjects under prefix.
func jetStream(t *testing.T, prefix string) jetstream.JetStream {
	t.Helper()
	_, js := bustest.Raw(t, bustest.Server(t).ClientURL())
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "TEST", Subjects: []string{prefix + ".>"},
		Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	return js
}

// TestUniversal runs Watermill's universal Pub/Sub tests, for the features
// the Pub/Sub declares, against a real JetStream (their short variants
// under the race detector).
func TestUniversal(t *testing.T) {
	js := jetStream(t, "wmtest")
	log := slog.New(slog.DiscardHandler)
	features := tests.Features{
		ConsumerGroups:                   true,
		GuaranteedOrder:                  true, // one message in flight per subscription
		Persistent:                       true,
		NewSubscriberReceivesOldMessages: true,
		GenerateTopicFunc:                func(tc tests.TestContext) string { return "wmtest." + string(tc.TestID) },
		// One message in flight is one round trip per message: under the
		// race detector and a loaded machine, the thousands of messages of
		// the long variants can take longer than the suite's 15 s reads.
		ForceShort: raceEnabled,
	}
	tests.TestPubSub(t, features,
		func(*testing.T) (message.Publisher, message.Subscriber) {
			return pubsub.NewPublisher(js, log), pubsub.NewSubscriber(js, pubsub.Config{}, log)
		},
		func(_ *testing.T, group string) (message.Publisher, message.Subscriber) {
			durable := func(topic string) string { return group + "_" + strings.TrimPrefix(topic, "wmtest.") }
			return pubsub.NewPublisher(js, log), pubsub.NewSubscriber(js, pubsub.Config{Durable: durable}, log)
		})
}
