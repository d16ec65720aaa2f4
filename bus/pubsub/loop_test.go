package pubsub_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/pubsub"
	"github.com/pace-platform/pace/schemas"
)

// loopConsumer publishes n decisions of job (replicas 1 to n) on a real
// bus and returns a durable consumer of them.
func loopConsumer(t *testing.T, c *bus.Client, job string, n int) jetstream.Consumer {
	t.Helper()
	p := c.Prefix()
	for i := 1; i <= n; i++ {
		bustest.Publish(t, c, p.Decisions(job), &schemas.Decision{Job: job, At: time.Unix(int64(i), 0).UTC(),
			Replicas: i, Reason: "test", Controller: "deadline"})
	}
	cons, err := c.JetStream().CreateOrUpdateConsumer(context.Background(), p.Stream(schemas.StreamDecisions), jetstream.ConsumerConfig{
		Durable: "loop-" + job, FilterSubject: p.Decisions(job), AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

// TestLoopHandlesInOrder runs a Loop one message at a time: the handler
// sees the messages in the stream's order, through the middlewares (the
// first outermost), with their JetStream metadata; a handler error naks the
// message, which comes back; a malformed message is set aside and the loop
// goes on; once every message is acked the consumer has nothing pending.
func TestLoopHandlesInOrder(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	cons := loopConsumer(t, c, "ordered", 3)
	bustest.Publish(t, c, c.Prefix().Decisions("ordered"), &schemas.Decision{Job: "ordered", At: time.Unix(4, 0).UTC(),
		Replicas: 4, Reason: "test", Controller: "deadline"})
	if err := c.Conn().PublishMsg(&nats.Msg{Subject: c.Prefix().Decisions("ordered"), Data: []byte("{not json"),
		Header: nats.Header{schemas.HeaderSchema: {"decision"}}}); err != nil {
		t.Fatal(err)
	}
	dead, err := c.Conn().SubscribeSync(c.Prefix().Metrics("ordered", schemas.DeadMetrics))
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var seen []string
	note := func(s string) { mu.Lock(); seen = append(seen, s); mu.Unlock() }
	mark := func(name string) message.HandlerMiddleware {
		return func(h message.HandlerFunc) message.HandlerFunc {
			return func(m *message.Message) ([]*message.Message, error) { note(name); return h(m) }
		}
	}
	failed := false
	handled := make(chan struct{}, 16)
	loop := pubsub.Loop{
		Middlewares: []message.HandlerMiddleware{mark("outer"), mark("inner"), pubsub.SetAside(c, "loop-test")},
		Handler: func(m *message.Message) ([]*message.Message, error) {
			d, err := pubsub.Decode[schemas.Decision](m)
			if err != nil {
				return nil, err
			}
			md, err := pubsub.Metadata(m)
			if err != nil {
				return nil, err
			}
			note(fmt.Sprintf("%d#%d", d.Replicas, md.NumDelivered))
			handled <- struct{}{}
			if d.Replicas == 2 && !failed {
				failed = true
				return nil, errors.New("try again")
			}
			return nil, nil
		},
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx, cons) }()
	for range 5 { // 1, 2 (failed), 2 again, 3 and 4
		select {
		case <-handled:
		case <-time.After(time.Minute):
			t.Fatal("the loop handled fewer than 5 messages")
		}
	}
	if _, err := dead.NextMsg(time.Minute); err != nil {
		t.Fatalf("malformed message not set aside: %v", err)
	}
	bustest.Eventually(t, time.Minute, "every message acked", func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil once its context ends", err)
	}

	mu.Lock()
	defer mu.Unlock()
	var order []string
	for i, s := range seen {
		if s == "outer" && (i+1 >= len(seen) || seen[i+1] != "inner") {
			t.Errorf("middlewares ran %v: want outer, then inner, around each message", seen)
		}
		if s != "outer" && s != "inner" {
			order = append(order, s)
		}
	}
	// A nak sends the message back at once; where it lands among the
	// others is the server's to choose, but each decision comes in order
	// of the stream the first time.
	first := slices.DeleteFunc(slices.Clone(order), func(s string) bool { return s[len(s)-2:] != "#1" })
	if !slices.Equal(first, []string{"1#1", "2#1", "3#1", "4#1"}) || !slices.Contains(order, "2#2") {
		t.Errorf("handled %v, want 1 to 4 in order and 2 again", order)
	}
}

// TestLoopConcurrent runs a Loop whose handlers wait for each other: each
// returns only once all three are running, which only a concurrent loop
// lets happen.
func TestLoopConcurrent(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	cons := loopConsumer(t, c, "concurrent", 3)
	var running sync.WaitGroup
	running.Add(3)
	all := make(chan struct{})
	go func() { running.Wait(); close(all) }()
	loop := pubsub.Loop{Concurrent: true, Handler: func(*message.Message) ([]*message.Message, error) {
		running.Done()
		select {
		case <-all:
			return nil, nil
		case <-time.After(time.Minute):
			return nil, errors.New("the other handlers never ran alongside")
		}
	}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx, cons) }()
	bustest.Eventually(t, 2*time.Minute, "three messages handled at once and acked", func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.AckFloor.Consumer == 3
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestLoopSetsAsideAPanic runs a Loop whose handler panics on one message:
// with Recover inside SetAside, the message becomes a dead letter naming
// the panic, counted by CountMalformed, and the loop goes on to the next.
func TestLoopSetsAsideAPanic(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	cons := loopConsumer(t, c, "crash", 2)
	dead, err := c.Conn().SubscribeSync(c.Prefix().Metrics("crash", schemas.DeadMetrics))
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan int, 4)
	malformed := prometheus.NewCounter(prometheus.CounterOpts{Name: "malformed_total", Help: "Malformed messages."})
	loop := pubsub.Loop{
		Middlewares: []message.HandlerMiddleware{pubsub.SetAside(c, "loop-test"), pubsub.CountMalformed(malformed),
			pubsub.Recover(slog.New(slog.DiscardHandler))},
		Handler: func(m *message.Message) ([]*message.Message, error) {
			d, err := pubsub.Decode[schemas.Decision](m)
			if err != nil {
				return nil, err
			}
			if d.Replicas == 1 {
				panic("replicas 1 is unheard of")
			}
			handled <- d.Replicas
			return nil, nil
		},
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx, cons) }()
	select {
	case n := <-handled:
		if n != 2 {
			t.Errorf("handled replicas %d, want 2", n)
		}
	case <-time.After(time.Minute):
		t.Fatal("the loop did not go on after the panic")
	}
	msg, err := dead.NextMsg(time.Minute)
	if err != nil {
		t.Fatalf("no dead letter for the message that panicked: %v", err)
	}
	letter, err := bus.Decode[schemas.DeadLetter](msg.Data, msg.Header)
	if err != nil {
		t.Fatal(err)
	}
	if letter.Reason != schemas.Malformed || !strings.Contains(letter.LastError, "replicas 1 is unheard of") {
		t.Errorf("dead letter %+v, want malformed, naming the panic", letter)
	}
	var counted dto.Metric
	if err := malformed.Write(&counted); err != nil {
		t.Fatal(err)
	}
	if n := counted.GetCounter().GetValue(); n != 1 {
		t.Errorf("malformed messages counted: %v, want 1", n)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}
