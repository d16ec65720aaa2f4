package pubsub

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// Decode reads a message of Pace's schema T from m, as bus.Decode does from
// NATS: a schema or version in its metadata that this build cannot read,
// or a body that does not decode or validate, is an error wrapping
// bus.ErrMalformed (which SetAside dead-letters).
func Decode[T any, P interface {
	*T
	schemas.Message
}](m *message.Message) (*T, error) {
	h := make(nats.Header, 2)
	for _, k := range []string{schemas.HeaderSchema, schemas.HeaderSchemaVersion} {
		if v, ok := m.Metadata[k]; ok {
			h.Set(k, v)
		}
	}
	return bus.Decode[T, P](m.Payload, h)
}

// NewMessage validates v and returns it as a Watermill message with the
// given UUID and Pace's headers as metadata: its schema and version, and
// ctx's correlation id and traceparent (bus.NewMsg), so that a handler's
// output continues the correlation of the message it handles. A UUID
// derived from the handled message's makes a handler that runs twice
// publish once.
func NewMessage(ctx context.Context, uuid string, v schemas.Message) (*message.Message, error) {
	nm, err := bus.NewMsg(ctx, "", v)
	if err != nil {
		return nil, err
	}
	m := message.NewMessage(uuid, nm.Data)
	for k, vals := range nm.Header {
		if len(vals) > 0 {
			m.Metadata[k] = vals[0]
		}
	}
	return m, nil
}
