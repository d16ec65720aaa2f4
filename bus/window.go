package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// publishWindow is the asynchronous publishes of one sender still waiting
// for the server's answer, at most its capacity: when it is full, add
// waits for the older half's answers, so that a sender of N messages
// holds a window's messages, not N. It keeps the first failure; the
// sender stops once failed reports one.
type publishWindow struct {
	ctx     context.Context
	pending []jetstream.PubAckFuture
	err     error
}

// publishWindowSize is the window of a bulk sender, and the publishes the
// client lets be in flight (jetstream.WithPublishAsyncMaxPending).
const publishWindowSize = 4096

func newPublishWindow(ctx context.Context) *publishWindow {
	return &publishWindow{ctx: ctx, pending: make([]jetstream.PubAckFuture, 0, publishWindowSize)}
}

// add records a publish sent, first waiting for the older half of the
// window when it is full.
func (w *publishWindow) add(f jetstream.PubAckFuture) {
	if len(w.pending) == cap(w.pending) {
		half := cap(w.pending) / 2
		w.await(w.pending[:half])
		w.pending = append(w.pending[:0], w.pending[half:]...)
	}
	w.pending = append(w.pending, f)
}

// failed returns the first failure seen so far.
func (w *publishWindow) failed() error { return w.err }

// wait waits for the answer to every publish in the window and returns
// the first failure. Each is awaited, even after a failure: when wait
// returns, nothing sent is still on its way to the stream.
func (w *publishWindow) wait() error {
	w.await(w.pending)
	w.pending = w.pending[:0]
	return w.err
}

func (w *publishWindow) await(futures []jetstream.PubAckFuture) {
	for _, f := range futures {
		var err error
		select {
		case <-f.Ok():
		case err = <-f.Err():
		case <-w.ctx.Done():
			err = w.ctx.Err()
		}
		if err != nil && w.err == nil {
			w.err = err
		}
	}
}
