package bus

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// The roles of a Client that stages depend on: each stage takes the
// smallest that serves it, and *Client implements them all.

// Consuming is what a stage that consumes one stream and publishes to
// others needs: the connections, the subject prefix, the dead-letter path
// for a message it cannot read, and Publish.
type Consuming interface {
	JetStream() jetstream.JetStream
	Conn() *nats.Conn
	Prefix() schemas.Prefix
	SetAside(ctx context.Context, stage string, msg jetstream.Msg, cause error)
	Publish(ctx context.Context, subject string, m schemas.Message, id string) error
}

var _ Consuming = (*Client)(nil)
