package bus

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// StoredResults returns the results of job stored so far, oldest first.
func (out Outputs) StoredResults(ctx context.Context, job string) ([]*schemas.Result, error) {
	c := out.c
	return collect(stored[schemas.Result](ctx, c, resultsFamily, c.prefix.JobResults(job), false))
}

// Stored returns the dead letters of job stored so far, oldest first.
func (box Letters) Stored(ctx context.Context, job string) ([]*schemas.DeadLetter, error) {
	c := box.c
	return collect(stored[schemas.DeadLetter](ctx, c, deadFamily, c.prefix.Dead(job), false))
}

// StoredMalformed returns the dead letters of job's messages that a stage
// could not read (pace.metrics.<job>.dead), oldest first.
func (box Letters) StoredMalformed(ctx context.Context, job string) ([]*schemas.DeadLetter, error) {
	c := box.c
	return collect(stored[schemas.DeadLetter](ctx, c, metricsFamily, c.prefix.Metrics(job, schemas.DeadMetrics), false))
}

// StoredProgress returns the progress samples of job stored so far, oldest first.
func (out Outputs) StoredProgress(ctx context.Context, job string) ([]*schemas.Progress, error) {
	c := out.c
	return collect(stored[schemas.Progress](ctx, c, metricsFamily, c.prefix.Metrics(job, schemas.ProgressMetrics), false))
}

// PublishLog stores one line of a job's log on pace.logs.<job>.
func (out Outputs) PublishLog(ctx context.Context, l *schemas.LogLine) error {
	c := out.c
	msg, err := NewMsg(ctx, c.prefix.Logs(l.Job), l)
	if err != nil {
		return err
	}
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish log of %s: %w", l.Job, err)
	}
	return nil
}

// Logs iterates over job's log lines, oldest first. Without follow it ends
// after the last stored line; with follow it waits for new lines until ctx
// ends (and then ends without an error).
func (out Outputs) Logs(ctx context.Context, job string, follow bool) iter.Seq2[*schemas.LogLine, error] {
	c := out.c
	return stored[schemas.LogLine](ctx, c, logsFamily, c.prefix.Logs(job), follow)
}

// Decisions iterates over job's scaling decisions (pace.decisions.<job>),
// oldest first, as Logs does over its lines: without follow it ends after
// the last stored one; with follow it waits for new ones until ctx ends.
// The stream keeps a job's recent decisions, not all of them.
func (out Outputs) Decisions(ctx context.Context, job string, follow bool) iter.Seq2[*schemas.Decision, error] {
	c := out.c
	return stored[schemas.Decision](ctx, c, decisionsFamily, c.prefix.Decisions(job), follow)
}

func collect[T any](seq iter.Seq2[*T, error]) ([]*T, error) {
	var out []*T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

// stored iterates over the messages of one subject filter of a stream
// decoded as T, oldest first; with follow it waits for new ones until ctx
// ends. A message that does not decode is logged and skipped.
func stored[T any, P interface {
	*T
	schemas.Message
}](ctx context.Context, c *Client, family schemas.Stream, filter string, follow bool) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		for msg, err := range c.read(ctx, family, filter, allRead(follow)) {
			if err != nil {
				yield(nil, err)
				return
			}
			v, err := Decode[T, P](msg.Data(), msg.Headers())
			if err != nil {
				c.log.Warn("undecodable message skipped", "subject", msg.Subject(), "err", err)
				continue
			}
			if !yield(v, nil) {
				return
			}
		}
	}
}

// readBudget bounds how long a read rides out a bus that is temporarily
// unavailable (see Temporary) before it fails.
const readBudget = 30 * time.Second

// readDone tells read, once it has read every stored message, whether to
// end; cons is its consumer.
type readDone func(ctx context.Context, cons jetstream.Consumer) (bool, error)

// allRead ends a read once it has read every stored message, unless follow
// (then nil: it follows new messages).
func allRead(follow bool) readDone {
	if follow {
		return nil
	}
	return func(context.Context, jetstream.Consumer) (bool, error) { return true, nil }
}

// read iterates over the messages of one subject filter of a stream, oldest
// first. Each time it has read every stored message it asks done whether to
// end; with a nil done it follows new messages until ctx ends. An error
// ends it; the end of ctx ends it without one.
//
// It reads through an ordered consumer, or, on a connection that may not
// create consumers (WithTokenAuth), through one the manager makes for it
// (pace.control.read), made again from the next message when it is lost.
func (c *Client) read(ctx context.Context, family schemas.Stream, filter string, done readDone) iter.Seq2[jetstream.Msg, error] {
	return func(yield func(jetstream.Msg, error) bool) {
		var (
			cons     jetstream.Consumer
			next     uint64 // the sequence after the last message read
			seen     uint64 // the deliveries of cons the read has seen
			caughtUp bool
		)
		// While a server of a cluster stops or restarts, creating the
		// consumer can be refused for a moment (no responders, 503
		// "insufficient resources" while the stream elects a leader).
		open := func() error {
			return RetryTemporary(ctx, c.log, readBudget, "read "+filter, func(ctx context.Context) (err error) {
				ctx, done := c.guard(ctx)
				defer func() { err = notPermitted(ctx, err); done() }()
				switch {
				case cons != nil:
				case c.token != "":
					if cons, err = c.readerConsumer(ctx, family, filter, next); err != nil {
						return err
					}
				default:
					cons, err = c.js.OrderedConsumer(ctx, c.prefix.Stream(family), jetstream.OrderedConsumerConfig{
						FilterSubjects: []string{filter},
					})
					if err != nil {
						return err
					}
				}
				seen = 0
				if done != nil {
					caughtUp, _, err = drained(ctx, cons, seen)
				}
				return err
			})
		}
		defer func() { c.dropReader(cons) }()
		var failingSince time.Time // of the temporary fetch failures in a row
		wait := fetchWait          // of the next fetch of stored messages
		for ctx.Err() == nil {
			if cons == nil {
				if err := open(); err != nil {
					yield(nil, fmt.Errorf("read %s: %w", filter, err))
					return
				}
			}
			if caughtUp && done != nil {
				end, err := done(ctx, cons)
				if err != nil {
					yield(nil, err)
					return
				}
				if end {
					return
				}
			}
			pull := consume.Pull{Max: 256, Wait: wait}
			if caughtUp && done == nil {
				pull.Wait = consume.IdleWait // following: wait long, as every idle reader does
			}
			caughtUp = true // when following, also when nothing came within the wait
			if c.token == "" {
				seen = 0 // an ordered consumer's fetch makes its consumer anew
			}
			read := 0
			var err error
			for msg, ferr := range consume.Fetch(ctx, cons, pull) {
				if ferr != nil {
					err = ferr
					break
				}
				read++
				if md, err := msg.Metadata(); err == nil {
					caughtUp, next, seen = md.NumPending == 0, md.Sequence.Stream+1, md.Sequence.Consumer
				}
				if !yield(msg, nil) {
					return
				}
			}
			if err == nil && read == 0 && done != nil {
				// A busy server (a cluster's follower above all) may send
				// nothing within the wait while messages remain: the
				// consumer, not the silence, says whether all were read,
				// and the next fetch waits longer.
				var missed bool
				caughtUp, missed, err = drained(ctx, cons, seen)
				if missed && err == nil && c.token != "" {
					// The manager's reader does not deliver again what it
					// delivered once: another starts from next. (An ordered
					// consumer's next fetch starts from there by itself.)
					c.dropReader(cons)
					cons = nil
				}
				wait = min(2*wait, maxFetchWait)
			} else if read > 0 {
				wait = fetchWait
			}
			if err != nil && c.token != "" && readerLost(err) {
				cons, caughtUp = nil, false // the manager makes another from next
				continue
			}
			if err == nil || !Temporary(err) {
				failingSince = time.Time{}
			} else if failingSince.IsZero() || c.clk.Since(failingSince) < readBudget {
				// Each fetch recreates the ordered consumer, maybe on another
				// server whose interest has not crossed the routes yet, or
				// while a stream elects a leader; the next fetch goes on
				// from the same position.
				if failingSince.IsZero() {
					failingSince = c.clk.Now()
				}
				// The wait also bounds recreating the consumer, which a
				// loaded cluster may take longer than the first wait for.
				caughtUp, wait = false, min(2*wait, maxFetchWait)
				pauseFor(ctx, 100*time.Millisecond)
				continue
			}
			if err != nil {
				if ctx.Err() == nil {
					yield(nil, fmt.Errorf("read %s: %w", filter, err))
				}
				return
			}
		}
	}
}

// drained reports whether cons has nothing more for a read that has seen
// seen of its deliveries: none pending, and none delivered that the read
// did not see. It reports the latter as missed: a message the server sends
// as a fetch's wait ends reaches no one, and the consumer counts it as
// delivered all the same.
func drained(ctx context.Context, cons jetstream.Consumer, seen uint64) (caughtUp, missed bool, err error) {
	info, err := cons.Info(ctx)
	if err != nil {
		return false, false, err
	}
	missed = info.Delivered.Consumer > seen
	return info.NumPending == 0 && !missed, missed, nil
}

// A read's fetch of stored messages waits fetchWait for them, twice as long
// after each fetch that brought none or failed, up to maxFetchWait.
const (
	fetchWait    = 500 * time.Millisecond
	maxFetchWait = 8 * time.Second
)

// readerLost reports whether a fetch failed because its consumer is gone:
// deleted after ReaderIdle, or lost with a server.
func readerLost(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, nats.ErrNoResponders)
}

// dropReader deletes the consumer of a read that ended, rather than leave
// it to expire: one the manager made, or an ordered consumer's current one.
func (c *Client) dropReader(cons jetstream.Consumer) {
	if cons == nil {
		return
	}
	info := cons.CachedInfo()
	if info == nil || info.Name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.readers.DeleteConsumer(ctx, info.Stream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		c.log.Debug("reader consumer not deleted; it expires by itself", "consumer", info.Name, "err", err)
	}
}

// pauseFor waits for d or until ctx ends.
func pauseFor(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// LastDecision returns job's latest scaling decision, nil when it has none.
func (out Outputs) LastDecision(ctx context.Context, job string) (*schemas.Decision, error) {
	c := out.c
	st, err := c.Stream(ctx, decisionsFamily)
	if err != nil {
		return nil, err
	}
	msg, err := st.GetLastMsgForSubject(ctx, c.prefix.Decisions(job))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last decision of %s: %w", job, err)
	}
	return Decode[schemas.Decision](msg.Data, msg.Header)
}
