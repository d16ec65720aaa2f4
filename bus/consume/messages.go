package consume

import (
	"context"
	"errors"
	"iter"

	"github.com/nats-io/nats.go/jetstream"
)

// Messages yields cons's messages until ctx ends or the loop breaks, the
// client keeping up to pullMax of them requested ahead (zero: 1,000). An
// error that ends the reading (the consumer deleted, heartbeats missed past
// nats.go's patience) is yielded with a nil message, last; ctx ending is
// not one.
func Messages(ctx context.Context, cons jetstream.Consumer, pullMax int) iter.Seq2[jetstream.Msg, error] {
	return func(yield func(jetstream.Msg, error) bool) {
		if pullMax <= 0 {
			pullMax = 1000
		}
		msgs, err := cons.Messages(jetstream.PullMaxMessages(pullMax))
		if err != nil {
			yield(nil, err)
			return
		}
		defer msgs.Stop()
		stop := context.AfterFunc(ctx, msgs.Stop)
		defer stop()
		for {
			msg, err := msgs.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					yield(nil, err)
				}
				return
			}
			if !yield(msg, nil) {
				return
			}
		}
	}
}
