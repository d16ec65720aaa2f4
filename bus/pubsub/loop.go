package pubsub

import (
	"context"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/pace-platform/pace/bus/consume"
)

// Loop runs a handler on the messages of a JetStream consumer with the
// handler and middleware types of Watermill's Router, for the stages whose
// consumption the Router does not fit: many messages waiting at once (the
// gate's requests in APF queues), or messages settled in an order of the
// stage's own after their handler (the processor acks a sample once the
// progress it published is stored). A message reaches the handler as a
// Subscriber's does: its headers as metadata, its context carrying its
// correlation id, traceparent and JetStream message (Msg, Metadata).
// Handlers publish what they produce themselves: the messages they return
// are dropped.
type Loop struct {
	// Handler handles one message.
	Handler message.HandlerFunc
	// Middlewares wrap Handler, the first outermost, as the Router applies
	// them.
	Middlewares []message.HandlerMiddleware
	// Settle finishes a message once its handler returned. nil acks it
	// when the handler succeeded and naks it otherwise. A middleware that
	// set the message aside has settled it already and returns no error:
	// the ack that follows fails, and is ignored.
	Settle func(jm jetstream.Msg, err error)
	// Concurrent runs each message's handler on a goroutine of its own, so
	// that many wait at once (the consumer's MaxAckPending bounds them);
	// otherwise messages are handled one at a time, in the stream's order.
	Concurrent bool
	// PullMax is how many messages the loop asks the server for ahead of
	// its handler; 0 means 1,000.
	PullMax int
}

// Run handles cons's messages until ctx ends, then waits for the handlers
// running and returns nil.
func (l *Loop) Run(ctx context.Context, cons jetstream.Consumer) error {
	h := l.Handler
	for i := len(l.Middlewares) - 1; i >= 0; i-- {
		h = l.Middlewares[i](h)
	}
	settle := l.Settle
	if settle == nil {
		settle = ackOrNak
	}
	var running sync.WaitGroup
	defer running.Wait()
	for jm, err := range consume.Messages(ctx, cons, l.PullMax) {
		if err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		handle := func() {
			m, done := watermillMsg(ctx, jm)
			defer done()
			_, err := h(m)
			settle(jm, err)
		}
		if l.Concurrent {
			running.Go(handle)
		} else {
			handle()
		}
	}
	return nil
}

// ackOrNak is the default Settle.
func ackOrNak(jm jetstream.Msg, err error) {
	if err != nil {
		_ = jm.Nak()
		return
	}
	_ = jm.Ack()
}
