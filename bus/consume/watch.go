package consume

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrWatchEnded is the error of a key-value watch that ended before its
// context did: its subscription closed (the connection closed, or the
// server ended it). Whoever follows the bucket is to start again.
var ErrWatchEnded = errors.New("the watch ended")

// Watch follows the keys of kv that match keys (">" for all; options as
// jetstream's) and yields each entry as it comes, and a nil entry once
// every value stored when it started has come (none with UpdatesOnly). It
// ends without an error when ctx ends or the loop breaks; a watch that
// cannot start or ends first yields its error, last, with a nil entry.
func Watch(ctx context.Context, kv jetstream.KeyValue, keys string, opts ...jetstream.WatchOpt) iter.Seq2[jetstream.KeyValueEntry, error] {
	return func(yield func(jetstream.KeyValueEntry, error) bool) {
		// The watch's own context ends with it: nats.go keeps a goroutine
		// per watch until its context ends, Stop or not.
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := kv.Watch(wctx, keys, opts...)
		if err != nil {
			if ctx.Err() == nil {
				yield(nil, fmt.Errorf("watch %s %s: %w", kv.Bucket(), keys, err))
			}
			return
		}
		defer w.Stop() //nolint:errcheck // ending a watch: nothing to do about it
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					if ctx.Err() == nil {
						yield(nil, fmt.Errorf("watch %s %s: %w", kv.Bucket(), keys, ErrWatchEnded))
					}
					return
				}
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// Update is one step of a watch as Updates delivers it: an entry, nil once
// caught up, or, last, the error that ended the watch.
type Update struct {
	Entry jetstream.KeyValueEntry
	Err   error
}

// Updates is Watch for a loop that selects on a watch beside its timers:
// the same steps on a channel, which closes once the watch has ended (ctx
// ended, or after an Update with its error). The loop is to read the
// channel until then, or end ctx.
func Updates(ctx context.Context, kv jetstream.KeyValue, keys string, opts ...jetstream.WatchOpt) <-chan Update {
	ch := make(chan Update, 256) // as a watcher's own: a loop may coalesce what is waiting
	go func() {
		defer close(ch)
		for e, err := range Watch(ctx, kv, keys, opts...) {
			select {
			case ch <- Update{Entry: e, Err: err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
