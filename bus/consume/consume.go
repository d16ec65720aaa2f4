// Package consume is Pace's one way to read a JetStream consumer: a pull
// request whose messages are yielded as they come (Fetch), and a consumer's
// messages for as long as one reads (Messages). Every loop that takes
// messages from a consumer, in the bus and in its Watermill subscriber,
// reads through it, so that waits, heartbeats and the end of a wait are
// handled one way; what a loop does with each message (decode, ack, nak,
// dead letter) stays with the loop, which knows its stream.
package consume

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// IdleWait is the longest one request for a consumer's next messages waits
// in Pace's long-running readers (a follower of stored events, the ledger,
// the dead-letter mover, a stage's subscription). A message that comes is
// handed out at once whatever the wait, so the wait only sets how often an
// idle reader asks again: each request wakes the client and the server,
// and an ordered consumer is made anew at each. The server's heartbeat on
// such a wait (IdleHeartbeat) still tells within 20 s that a consumer is
// lost.
const IdleWait = 30 * time.Second

// IdleHeartbeat is the heartbeat a request waiting IdleWait or longer asks
// of the server (nats.go's default on a wait that long is 5 s): an idle
// reader's only traffic, and nats.go tells a lost consumer after two missed.
const IdleHeartbeat = 10 * time.Second

// IgnoreWaitEnd returns err, or nil for the errors that only mean a
// request's wait ended (its deadline or context, a timeout).
func IgnoreWaitEnd(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, nats.ErrTimeout) {
		return nil
	}
	return err
}
