package consume_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/consume"
)

// stream makes a stream of subject t.<n> with one durable pull consumer on
// a real embedded server, and returns the consumer and a publisher.
func stream(t *testing.T) (jetstream.JetStream, jetstream.Consumer, func(n int)) {
	t.Helper()
	_, js := bustest.Raw(t, "", bustest.Server(t).InProcess())
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.*"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, "T", jetstream.ConsumerConfig{Durable: "c", AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		for i := range n {
			if _, err := js.Publish(ctx, fmt.Sprintf("t.%d", i), []byte("m")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return js, cons, publish
}

// drain reads one Fetch whole.
func drain(ctx context.Context, cons jetstream.Consumer, p consume.Pull) (got int, err error) {
	for msg, ferr := range consume.Fetch(ctx, cons, p) {
		if ferr != nil {
			if msg != nil {
				return got, errors.New("an error came with a message")
			}
			err = ferr
			continue
		}
		got++
		_ = msg.Ack()
	}
	return got, err
}

func TestFetchYieldsWhatCameAndAWaitEndIsNoError(t *testing.T) {
	_, cons, publish := stream(t)
	publish(3)
	if got, err := drain(t.Context(), cons, consume.Pull{Max: 3, Wait: time.Minute}); got != 3 || err != nil {
		t.Fatalf("waiting fetch of 3: %d messages, error %v; want 3 and none", got, err)
	}
	publish(2)
	// Without a wait, a request takes what the consumer counts as pending
	// when the server reads it, which may lag a publish a little.
	bustest.Eventually(t, 10*time.Second, "2 messages pending", func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 2
	})
	if got, err := drain(t.Context(), cons, consume.Pull{Max: 1}); got != 1 || err != nil {
		t.Fatalf("fetch of what is pending, one at most: %d messages, error %v; want 1 and none", got, err)
	}
	if got, err := drain(t.Context(), cons, consume.Pull{Max: 10}); got != 1 || err != nil {
		t.Fatalf("fetch of what is pending: %d messages, error %v; want the 1 left and none", got, err)
	}
	if got, err := drain(t.Context(), cons, consume.Pull{Max: 10}); got != 0 || err != nil {
		t.Fatalf("fetch with nothing pending: %d messages, error %v; want 0 and none", got, err)
	}
	// A wait that runs out before the request is sent brings nothing, and
	// is no error either.
	if got, err := drain(t.Context(), cons, consume.Pull{Max: 10, Wait: time.Nanosecond}); got != 0 || err != nil {
		t.Fatalf("fetch whose wait ran out at once: %d messages, error %v; want 0 and none", got, err)
	}
	// Nor is a wait that ends with fewer messages than asked for. (Last: the
	// server may hold the request a little longer than the client waits.)
	publish(1)
	if got, err := drain(t.Context(), cons, consume.Pull{Max: 10, Wait: 300 * time.Millisecond}); got != 1 || err != nil {
		t.Fatalf("waiting fetch of 10: %d messages, error %v; want the 1 there and none", got, err)
	}
}

func TestFetchYieldsAMessageAsItComes(t *testing.T) {
	js, cons, _ := stream(t)
	sent := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, err := js.Publish(context.Background(), "t.0", []byte("m"))
		sent <- err
	}()
	// The request asks for ten within a minute: the one message ends the
	// loop's wait for it at once, not the minute.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for msg, err := range consume.Fetch(ctx, cons, consume.Pull{Max: 10, Wait: time.Minute}) {
		if err != nil {
			t.Fatal(err)
		}
		_ = msg.Ack()
		break // breaking out ends the request
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if got, err := drain(t.Context(), cons, consume.Pull{Max: 10}); got != 0 || err != nil {
		t.Fatalf("after the break: %d messages, error %v; want 0 and none", got, err)
	}
}

func TestFetchReportsALostConsumer(t *testing.T) {
	js, cons, _ := stream(t)
	if err := js.DeleteConsumer(t.Context(), "T", "c"); err != nil {
		t.Fatal(err)
	}
	got, err := drain(t.Context(), cons, consume.Pull{Max: 10, Wait: 2 * time.Second})
	if got != 0 || err == nil {
		t.Fatalf("fetch from a deleted consumer: %d messages, error %v; want 0 and an error", got, err)
	}
	if got, err := drain(t.Context(), cons, consume.Pull{Max: 10}); err == nil {
		t.Fatalf("fetch without wait from a deleted consumer: %d messages and no error", got)
	}
}

func TestMessagesYieldUntilTheContextEnds(t *testing.T) {
	_, cons, publish := stream(t)
	publish(5)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := 0
	for msg, err := range consume.Messages(ctx, cons, 0) {
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		_ = msg.Ack()
		if got++; got == 5 {
			cancel() // ends the loop, with no error
		}
	}
	if got != 5 {
		t.Fatalf("read %d messages, want 5", got)
	}
}
