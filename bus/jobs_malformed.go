package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/schemas"
)

// setAsideTimeout bounds setting a job event aside, so that a reader the
// bus does not allow to (a user without the permissions) is held up
// briefly, and not for as long as its own context lasts.
const setAsideTimeout = 5 * time.Second

// setAsideRetry is how long a client waits, after failing to set a job
// event aside, before it tries again for that event.
const setAsideRetry = time.Minute

// jobEventsStage names the job-event readers in their logs.
const jobEventsStage = "job-events"

// malformedEvents is what a client knows of the job events it could not
// decode. Every reader of job events (the manager's recovery, watches, the
// visualizer's streams) reads the same stored events, and reads them again
// after a restart: the first to meet an unreadable one keeps it as a dead
// letter, the others find it kept.
type malformedEvents struct {
	count prometheus.Counter
	// turn is held, as a one-slot semaphore, while an event is set aside;
	// it guards kept and retry.
	turn  chan struct{}
	kept  map[uint64]bool      // PACE_JOBS sequences known to have a dead letter
	retry map[uint64]time.Time // sequences that failed to be set aside: when to try again

	mu      sync.Mutex              // guards attempt
	attempt context.CancelCauseFunc // ends the running attempt; nil between attempts
}

// refused ends the running attempt to set an event aside, if any, with
// cause: the server refused a request of this connection (a permission
// violation), most likely one of the attempt's, which would otherwise wait
// for its timeout. A user the bus does not allow to keep job events
// (pace-client) thus skips them at once. Another request's refusal ends
// the attempt too, which is then tried again later. Safe for concurrent use.
func (m *malformedEvents) refused(cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.attempt != nil {
		m.attempt(cause)
	}
}

// start returns ctx, ended by refused until end is called.
func (m *malformedEvents) start(ctx context.Context) (_ context.Context, end func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	m.mu.Lock()
	m.attempt = cancel
	m.mu.Unlock()
	return ctx, func() {
		m.mu.Lock()
		m.attempt = nil
		m.mu.Unlock()
		cancel(nil)
	}
}

// attemptError is err, with why the attempt's ctx ended when it did.
func attemptError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

func newMalformedEvents() *malformedEvents {
	return &malformedEvents{
		count: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_job_events_malformed_total",
			Help: "Job events no reader could decode, dead-lettered on pace.metrics.<job>.dead by this process."}),
		turn:  make(chan struct{}, 1),
		kept:  map[uint64]bool{},
		retry: map[uint64]time.Time{},
	}
}

// keep records that seq needs no more setting aside; m.turn must be held.
func (m *malformedEvents) keep(seq uint64) {
	m.kept[seq] = true
	delete(m.retry, seq)
}

// MalformedEvents returns the counter of the job events this client
// dead-lettered, pace_monitor_job_events_malformed_total; register it with
// a prometheus.Registerer. An event is counted once by the process that
// stored its letter.
func (j Jobs) MalformedEvents() prometheus.Collector { return j.c.malformed.count }

// SetAsideEvent is how a reader of job events (Events, or a
// consumer of the PACE_JOBS stream) deals with one it cannot decode: it
// keeps the stored event msg, unreadable for cause, as a dead letter on
// pace.metrics.<job>.dead (reason malformed, the event byte for byte, in
// the dead-letter object store when too large for the letter), once per
// stored event. A letter already kept for its sequence, by this
// process or another, is not written again, and only a new letter is
// counted. The event stays in its stream, and msg is neither acknowledged
// nor terminated (the caller's). If no letter can be stored within 5
// seconds (the bus is recovering), or the bus refuses it (a user without
// the permissions, such as pace-client: at once, when the client was made
// by Connect), the event is skipped, and a read a minute later or more
// tries again. Only the object of a large body, once its write has
// started, is written to its end (up to 10 more seconds), whatever ends
// the attempt, so that it leaves no partial chunks behind.
func (j Jobs) SetAsideEvent(ctx context.Context, msg jetstream.Msg, cause error) {
	c := j.c
	log := c.log.With("stage", jobEventsStage, "subject", msg.Subject(), "err", cause)
	md, err := msg.Metadata()
	if err != nil {
		log.Warn("undecodable job event skipped; no stream sequence to dead-letter it by", "metadata_err", err)
		return
	}
	seq := md.Sequence.Stream
	log = log.With("seq", seq)
	m := c.malformed
	select {
	case m.turn <- struct{}{}:
		defer func() { <-m.turn }()
	case <-ctx.Done():
		return
	}
	if m.kept[seq] || c.clk.Now().Before(m.retry[seq]) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, setAsideTimeout)
	defer cancel()
	ctx, end := m.start(ctx)
	defer end()
	kept, err := c.hasMalformedLetter(ctx, c.prefix.SubjectJob(msg.Subject()), msg.Subject(), seq)
	if err != nil {
		err = attemptError(ctx, err)
		m.retry[seq] = c.clk.Now().Add(setAsideRetry) // and not at every read meanwhile
		log.Warn("undecodable job event skipped; its dead letters could not be read, will retry",
			"dead_letter_err", err, "retry_after", setAsideRetry)
		return
	}
	if kept {
		m.keep(seq)
		return
	}
	_, duplicate, err := c.keepMalformed(ctx, msg, cause)
	switch {
	case err == nil:
		m.keep(seq)
		if !duplicate {
			m.count.Inc()
			log.Warn("undecodable job event dead-lettered")
		}
	case errors.Is(err, nats.ErrMaxPayload):
		// Too large even without its body (headers near max_payload):
		// retrying cannot help; count and log it once.
		m.keep(seq)
		m.count.Inc()
		log.Error("undecodable job event too large to dead-letter; left in its stream", "dead_letter_err", err)
	default:
		m.retry[seq] = c.clk.Now().Add(setAsideRetry)
		log.Warn("undecodable job event skipped; not dead-lettered yet, will retry",
			"dead_letter_err", attemptError(ctx, err), "retry_after", setAsideRetry)
	}
}

// hasMalformedLetter reports whether job has a dead letter of the message
// stored at sequence seq on subject.
func (c *Client) hasMalformedLetter(ctx context.Context, job, subject string, seq uint64) (bool, error) {
	for l, err := range c.Letters().List(ctx, DeadMessages, job, false) {
		if err != nil {
			return false, err
		}
		if l.Reason == schemas.Malformed && l.Subject == subject && l.Sequence == seq {
			return true, nil
		}
	}
	return false, nil
}
