package bus

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startupBudget bounds how long a worker opening its job, or a presence
// watch starting, retries while the bus is temporarily unavailable.
const startupBudget = 2 * time.Minute

// Temporary reports whether err may pass by itself: a request that timed
// out, found no responder or was answered "unavailable" while a server
// restarts or a JetStream cluster elects its leaders, or "no suitable peers
// for placement" while one of its servers is down (a cluster too small for
// three replicas is found out before, by Provision's placement probe), or a
// consumer that heard no heartbeat from its server (killed, or restarting).
// Refusals (permissions, invalid options, a finished job, validation
// errors) are not temporary.
func Temporary(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrConsumerLeadershipChanged),
		errors.Is(err, jetstream.ErrNoHeartbeat): // a consumer's server went away: consume again
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code >= 500 || apiErr.ErrorCode == errCodeNoPeers
	}
	return false
}

// JetStream's codes for a store out of room: the server's or account's
// storage (insufficient resources; a new stream's bytes beyond what the
// store has left to reserve), or a stream's bounds with discard new
// (maximum bytes or messages exceeded, in a store failure).
const (
	errCodeInsufficientResources = 10023
	errCodeStorageExceeded       = 10047
	errCodeStoreFailed           = 10077
)

// StoreFull reports whether err is JetStream refusing a message for want of
// room, rather than failing: retrying soon stores nothing more.
func StoreFull(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == errCodeInsufficientResources || apiErr.ErrorCode == errCodeStorageExceeded ||
		apiErr.ErrorCode == errCodeStoreFailed &&
			(strings.Contains(apiErr.Description, "maximum bytes") || strings.Contains(apiErr.Description, "maximum messages"))
}

// perSubjectFull reports whether err is JetStream refusing a message because
// its subject holds as many as the stream keeps (discard new per subject).
func perSubjectFull(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStoreFailed &&
		strings.Contains(apiErr.Description, "maximum messages per subject")
}

// RetryTemporary runs step until it succeeds, returns an error that is not
// Temporary, ctx ends or budget has passed since the first attempt (zero:
// no bound but ctx). It waits between attempts with exponential backoff,
// from 200ms to 5s, and logs each temporary failure as what.
func RetryTemporary(ctx context.Context, log *slog.Logger, budget time.Duration, what string, step func(context.Context) error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = budget
	return backoff.RetryNotify(func() error {
		err := step(ctx)
		if err != nil && (ctx.Err() != nil || !Temporary(err)) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx), func(err error, next time.Duration) {
		log.Warn(what+" failed, retrying", "err", err, "retry_in", next.String()) // "1.5s", not nanoseconds in JSON
	})
}
