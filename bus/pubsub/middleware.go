package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/bus"
)

// Letters keeps the messages a stage cannot read (bus.Client).
type Letters interface {
	SetAside(ctx context.Context, stage string, msg jetstream.Msg, cause error)
}

// SetAside returns a middleware that hands a message its handler finds
// malformed (an error wrapping bus.ErrMalformed) to Pace's dead letters
// under stage's name, where it is counted and can be read, instead of
// having it delivered again for ever; the handler's other errors pass
// through (a nack, and a later delivery). Letters settles the message
// itself, so that the Router's ack that follows is a no-op.
func SetAside(l Letters, stage string) message.HandlerMiddleware {
	return SetAsideWith(func(ctx context.Context, msg jetstream.Msg, cause error) { l.SetAside(ctx, stage, msg, cause) })
}

// SetAsideWith is SetAside with another keeper of malformed messages, such
// as bus.Jobs.SetAsideEvent for job events; a message that keep leaves
// unsettled is acked after it.
func SetAsideWith(keep func(ctx context.Context, msg jetstream.Msg, cause error)) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(m *message.Message) ([]*message.Message, error) {
			out, err := h(m)
			if err == nil || !errors.Is(err, bus.ErrMalformed) {
				return out, err
			}
			jm, ok := Msg(m)
			if !ok {
				return out, err
			}
			keep(m.Context(), jm, err)
			return nil, nil
		}
	}
}

// Timeout returns a middleware that bounds each handling of a message: its
// context ends after d, and is the message's own again once the handler
// has returned (for the middlewares around it).
func Timeout(d time.Duration) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(m *message.Message) ([]*message.Message, error) {
			own := m.Context()
			ctx, cancel := context.WithTimeout(own, d)
			defer cancel()
			m.SetContext(ctx)
			defer m.SetContext(own)
			return h(m)
		}
	}
}

// Recover returns a middleware that turns a panic of the handler into an
// error wrapping bus.ErrMalformed that names it, and logs its stack: with
// SetAside around it, a message that crashes its handler becomes a dead
// letter instead of taking the stage down, and coming back to it for ever.
func Recover(log *slog.Logger) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(m *message.Message) (out []*message.Message, err error) {
			defer func() {
				if r := recover(); r != nil {
					log.Error("handler panicked; the message is set aside", "panic", r, "stack", string(debug.Stack()))
					out, err = nil, fmt.Errorf("%w: its handler panicked: %v", bus.ErrMalformed, r)
				}
			}()
			return h(m)
		}
	}
}

// CountMalformed returns a middleware that counts in c the messages whose
// handler returns an error wrapping bus.ErrMalformed (a panic under Recover
// is one). Put it inside SetAside, which turns such errors into dead
// letters.
func CountMalformed(c prometheus.Counter) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(m *message.Message) ([]*message.Message, error) {
			out, err := h(m)
			if errors.Is(err, bus.ErrMalformed) {
				c.Inc()
			}
			return out, err
		}
	}
}
