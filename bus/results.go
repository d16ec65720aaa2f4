package bus

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// ResultsOption configures Results.
type ResultsOption func(*resultsOptions)

type resultsOptions struct{ follow bool }

// Follow keeps Results waiting for new results instead of ending when the
// job has no outstanding work.
func Follow() ResultsOption { return func(o *resultsOptions) { o.follow = true } }

// Results iterates over job's results in the order they were stored. Without
// Follow it ends once every stored result has been read and the job has no
// item waiting or in progress (items being retried count as waiting). An
// error ends the iteration.
func (out Outputs) Results(ctx context.Context, job string, opts ...ResultsOption) iter.Seq2[*schemas.Result, error] {
	c := out.c
	var o resultsOptions
	for _, opt := range opts {
		opt(&o)
	}
	done := func(ctx context.Context, cons jetstream.Consumer) (bool, error) {
		return c.resultsComplete(ctx, cons, job)
	}
	if o.follow {
		done = nil
	}
	return func(yield func(*schemas.Result, error) bool) {
		for msg, err := range c.read(ctx, resultsFamily, c.prefix.JobResults(job), done) {
			if err != nil {
				yield(nil, fmt.Errorf("read results of %s: %w", job, err))
				return
			}
			r, err := Decode[schemas.Result](msg.Data(), msg.Headers())
			if err != nil {
				err = fmt.Errorf("result %s: %w", msg.Subject(), err)
			}
			if !yield(r, err) {
				return
			}
		}
		if ctx.Err() != nil && !o.follow {
			yield(nil, fmt.Errorf("read results of %s: %w", job, ctx.Err()))
		}
	}
}

// resultsComplete reports whether the job has no outstanding work and the
// reader has seen every stored result. Work is checked first: a result is
// stored before its item is acknowledged, so any result of finished work is
// already counted by the second check.
func (c *Client) resultsComplete(ctx context.Context, results jetstream.Consumer, job string) (bool, error) {
	stream, err := c.jobWorkStream(ctx, job)
	if err != nil {
		return false, err
	}
	info, err := c.jobConsumer(ctx, stream, job)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		return false, fmt.Errorf("work state of %s: %w", job, err)
	default:
		ci := info.CachedInfo()
		if ci.NumPending > 0 || ci.NumAckPending > 0 {
			return false, nil
		}
	}
	ri, err := results.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("results state of %s: %w", job, err)
	}
	return ri.NumPending == 0, nil
}
