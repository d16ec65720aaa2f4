package consume

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Pull is one request for a consumer's next messages.
type Pull struct {
	// Max is how many messages the request asks for at most (zero: one).
	Max int
	// Wait is how long the request waits for them; a message that comes is
	// yielded at once. Zero takes only the messages pending now.
	Wait time.Duration
}

// Fetch yields the messages one pull request on cons brings, as they come,
// and then, if the request failed, its error with a nil message. The wait
// ending is not an error, nor a wait that ran out before the request was
// sent (an ordered consumer made anew on a busy server may take all of
// it): nothing came. A request waiting IdleWait or longer asks the server
// for heartbeats, so that a lost consumer shows as an error within two of
// them. Breaking out of the loop ends the request; messages yielded and not
// acknowledged come back after their ack wait.
func Fetch(ctx context.Context, cons jetstream.Consumer, p Pull) iter.Seq2[jetstream.Msg, error] {
	return func(yield func(jetstream.Msg, error) bool) {
		n := max(p.Max, 1)
		var (
			batch jetstream.MessageBatch
			err   error
		)
		if p.Wait <= 0 {
			batch, err = cons.FetchNoWait(n)
		} else {
			fctx, cancel := context.WithTimeout(ctx, p.Wait)
			defer cancel()
			opts := []jetstream.FetchOpt{jetstream.FetchContext(fctx)}
			if p.Wait >= IdleWait {
				opts = append(opts, jetstream.FetchHeartbeat(IdleHeartbeat))
			}
			batch, err = cons.Fetch(n, opts...)
			if err != nil && (fctx.Err() != nil || errors.Is(err, jetstream.ErrInvalidOption)) {
				return // asked after its wait: FetchContext refuses a deadline past
			}
		}
		if err == nil {
			for msg := range batch.Messages() {
				if !yield(msg, nil) {
					return
				}
			}
			err = batch.Error()
		}
		if err = IgnoreWaitEnd(err); err != nil {
			yield(nil, err)
		}
	}
}
