// Package pubsub is a Watermill Pub/Sub over Pace's bus: a
// message.Publisher and a message.Subscriber on NATS JetStream
// (nats.go/jetstream), so that a Go service can follow Pace's subjects and
// publish on them with Watermill's Router and middlewares.
//
// A message's metadata is its NATS headers, Pace's among them
// (Pace-Schema, Pace-Schema-Version, Pace-Correlation-Id, traceparent):
// what a publisher sets as metadata is sent as headers, and a received
// message has every header as metadata (the first value of each). Its UUID
// is in its Nats-Msg-Id, as <subject>/<uuid>, so that JetStream drops a
// message published twice on a subject within the stream's duplicate
// window, and only then (its window spans the stream, which holds many
// subjects). A received message's UUID is its Nats-Msg-Id without that
// prefix, or, without one, its stream and sequence. A received message's context carries
// its correlation id and traceparent (bus.CorrelationID, bus.Traceparent),
// and its JetStream message (Msg) with the stream, sequence and delivery
// count (Metadata).
//
// The subscriber acknowledges a message to JetStream once the handler has
// acked it (the Router acks after the handler returns), and a nack asks for
// it again after Config.NakDelay. It never provisions: each topic is read
// from the stream whose subjects hold it, which Pace (or the caller)
// creates. SetAside hands a poison message to Pace's dead letters.
package pubsub

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// ErrClosed is returned by Publish and Subscribe after Close.
var ErrClosed = errors.New("pubsub: closed")

// Publisher publishes Watermill messages on JetStream subjects (the topic
// is the subject). It is safe for concurrent use.
type Publisher struct {
	js  jetstream.JetStream
	log *slog.Logger

	mu     sync.RWMutex
	closed bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream, log *slog.Logger) *Publisher {
	return &Publisher{js: js, log: log.With("component", "pubsub-publisher")}
}

// Publish publishes msgs on topic in order, each once the stream has stored
// the one before; it stops at the first that fails. A message's context
// bounds its publication.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	for _, m := range msgs {
		if _, err := p.js.PublishMsg(m.Context(), natsMsg(topic, m)); err != nil {
			return fmt.Errorf("publish %s on %s: %w", m.UUID, topic, err)
		}
	}
	return nil
}

// Close makes later calls to Publish fail; those under way end first.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}

// natsMsg is m as a NATS message on subject: its metadata as headers, its
// UUID in Nats-Msg-Id.
func natsMsg(subject string, m *message.Message) *nats.Msg {
	h := make(nats.Header, len(m.Metadata)+1)
	for k, v := range m.Metadata {
		h.Set(k, v)
	}
	if m.UUID != "" {
		h.Set(schemas.HeaderMsgID, subject+"/"+m.UUID)
	}
	return &nats.Msg{Subject: subject, Data: m.Payload, Header: h}
}

// Logger adapts log for Watermill (a Router's logger): its lifecycle lines
// ("Starting handler", "Waiting for messages", …) at debug level, its
// warnings and errors as such.
func Logger(log *slog.Logger) watermill.LoggerAdapter {
	return watermill.NewSlogLoggerWithLevelMapping(log, map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug})
}
