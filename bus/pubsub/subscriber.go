package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// Config configures a Subscriber. The zero value subscribes each call with
// its own consumer, one message at a time.
type Config struct {
	// Stream names the stream that holds a topic. nil: the server is asked
	// (a right to $JS.API.STREAM.NAMES, which Pace's stage users lack).
	Stream func(topic string) string
	// Durable names the durable consumer of a topic. Subscribers with the
	// same name share its messages (a consumer group) and a subscriber that
	// comes back goes on where its group was. nil: each Subscribe creates
	// its own consumer, which reads the topic from its first message and is
	// deleted when the subscription ends.
	Durable func(topic string) string
	// InFlight is how many messages a subscription hands out before one is
	// acked or nacked; 1 (the default) keeps the stream's order.
	InFlight int
	// AckWait is how long JetStream waits for a message's ack before it
	// delivers it again; default 30 s.
	AckWait time.Duration
	// MaxDeliver bounds a message's deliveries; 0 is unbounded. A message
	// that uses them up is left to JetStream's max-deliveries advisory.
	MaxDeliver int
	// NakDelay is how long a nacked message waits before it is delivered
	// again; 0 is at once.
	NakDelay time.Duration
	// Deliver is where a new consumer starts: the topic's first message
	// (the default, jetstream.DeliverAllPolicy), or for instance the last
	// message of each subject (jetstream.DeliverLastPerSubjectPolicy).
	Deliver jetstream.DeliverPolicy
	// Description describes the consumers to whoever lists them.
	Description string
}

func (c Config) withDefaults() Config {
	if c.InFlight <= 0 {
		c.InFlight = 1
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	return c
}

// Subscriber delivers the messages of JetStream subjects as Watermill
// messages. It is safe for concurrent use.
type Subscriber struct {
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	closed bool
	close  context.CancelFunc // ends every subscription
	ctx    context.Context    // done on Close
	wg     sync.WaitGroup     // subscriptions and the messages they handed out
}

var _ message.Subscriber = (*Subscriber)(nil)

// NewSubscriber returns a Subscriber on js.
func NewSubscriber(js jetstream.JetStream, cfg Config, log *slog.Logger) *Subscriber {
	ctx, cancel := context.WithCancel(context.Background())
	return &Subscriber{js: js, cfg: cfg.withDefaults(), log: log.With("component", "pubsub-subscriber"), ctx: ctx, close: cancel}
}

// Subscribe returns the messages of topic (a subject, wildcards allowed)
// until ctx ends or the subscriber is closed; the channel is then closed.
// It fails when no stream holds topic.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	cons, cleanup, err := s.consumer(ctx, topic)
	if err != nil {
		s.wg.Done()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	out := make(chan *message.Message)
	go func() {
		defer s.wg.Done()
		defer stop()
		defer cancel()
		s.deliver(ctx, cons, out)
		close(out)
		cleanup()
	}()
	return out, nil
}

// consumer creates the consumer of topic, and returns what deletes it when
// the subscription ends (nothing for a durable one).
func (s *Subscriber) consumer(ctx context.Context, topic string) (_ jetstream.Consumer, _ func(), err error) {
	var stream string
	if s.cfg.Stream != nil {
		stream = s.cfg.Stream(topic)
	} else if stream, err = s.js.StreamNameBySubject(ctx, topic); err != nil {
		return nil, nil, fmt.Errorf("subscribe %s: no stream holds it: %w", topic, err)
	}
	cfg := jetstream.ConsumerConfig{FilterSubject: topic, AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.cfg.AckWait,
		MaxDeliver: s.cfg.MaxDeliver, MaxAckPending: s.cfg.InFlight, DeliverPolicy: s.cfg.Deliver, Description: s.cfg.Description}
	if s.cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = -1
	}
	if s.cfg.Durable != nil {
		cfg.Durable = s.cfg.Durable(topic)
	} else {
		cfg.InactiveThreshold = time.Minute // the server's backstop if the delete below is lost
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("subscribe %s: consumer on %s: %w", topic, stream, err)
	}
	if cfg.Durable != "" {
		return cons, func() {}, nil
	}
	name := cons.CachedInfo().Name
	return cons, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.js.DeleteConsumer(dctx, stream, name); err != nil {
			s.log.Debug("consumer not deleted; the server removes it once inactive", "stream", stream, "consumer", name, "err", err)
		}
	}, nil
}

// deliver hands out the messages of cons, at most InFlight at a time,
// until ctx ends or the consumer is gone. It fetches only for free slots,
// so that no message waits in a client buffer while its ack wait runs, and
// a nacked message comes again before any later one.
func (s *Subscriber) deliver(ctx context.Context, cons jetstream.Consumer, out chan<- *message.Message) {
	slots := make(chan struct{}, s.cfg.InFlight)
	var pending sync.WaitGroup
	defer pending.Wait()
	for {
		n := take(ctx, slots)
		if n == 0 {
			return
		}
		got, err := s.fetch(ctx, cons, n, out, slots, &pending)
		for range n - got {
			<-slots
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
			s.log.Warn("subscription ended: its consumer is gone", "err", err)
			return
		case err != nil:
			s.log.Warn("fetch failed, will retry", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// take blocks for one free slot, then takes the others that are free; it
// returns how many it took, 0 when ctx ended.
func take(ctx context.Context, slots chan struct{}) int {
	select {
	case <-ctx.Done():
		return 0
	case slots <- struct{}{}:
	}
	n := 1
	for n < cap(slots) {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// fetch asks cons for up to n messages, waiting consume.IdleWait at most,
// and hands each out, settling it in a goroutine that frees its slot. It
// returns how many it got; a wait that found none is not an error.
func (s *Subscriber) fetch(ctx context.Context, cons jetstream.Consumer, n int, out chan<- *message.Message,
	slots chan struct{}, pending *sync.WaitGroup) (got int, err error) {
	for jm, err := range consume.Fetch(ctx, cons, consume.Pull{Max: n, Wait: consume.IdleWait}) {
		if err != nil {
			return got, err
		}
		got++
		m, done := watermillMsg(ctx, jm)
		select {
		case out <- m:
		case <-ctx.Done():
			done()
			_ = jm.Nak() // delivered again to whoever subscribes next
			<-slots
			continue
		}
		pending.Add(1)
		go func() {
			defer pending.Done()
			defer func() { <-slots }()
			defer done()
			s.settle(ctx, m, jm)
		}()
	}
	return got, nil
}

// settle acks or nacks jm as the handler of m does; a subscription that
// ends first nacks it.
func (s *Subscriber) settle(ctx context.Context, m *message.Message, jm jetstream.Msg) {
	var err error
	select {
	case <-m.Acked():
		err = jm.Ack()
	case <-m.Nacked():
		err = jm.NakWithDelay(s.cfg.NakDelay)
	case <-ctx.Done():
		err = jm.Nak()
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) { // a middleware that set it aside settled it
		s.log.Warn("message not settled; JetStream delivers it again after its ack wait", "subject", jm.Subject(), "err", err)
	}
}

// Close ends every subscription, nacking the messages handed out and not
// yet acked, and waits for them.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.close()
	s.wg.Wait()
	return nil
}

type msgKey struct{}

// watermillMsg is jm as a Watermill message whose context, a child of ctx
// that done ends, carries jm, its correlation id and traceparent.
func watermillMsg(ctx context.Context, jm jetstream.Msg) (m *message.Message, done context.CancelFunc) {
	h := jm.Headers()
	id := strings.TrimPrefix(h.Get(schemas.HeaderMsgID), jm.Subject()+"/")
	if id == "" {
		if md, err := jm.Metadata(); err == nil {
			id = md.Stream + ":" + strconv.FormatUint(md.Sequence.Stream, 10)
		}
	}
	m = message.NewMessage(id, jm.Data())
	for k, v := range h {
		if len(v) > 0 {
			m.Metadata[k] = v[0]
		}
	}
	ctx, done = context.WithCancel(bus.MessageContext(ctx, h))
	m.SetContext(context.WithValue(ctx, msgKey{}, jm))
	return m, done
}

// Msg returns the JetStream message a Subscriber received as m.
func Msg(m *message.Message) (jetstream.Msg, bool) {
	jm, ok := m.Context().Value(msgKey{}).(jetstream.Msg)
	return jm, ok
}

// Metadata returns the JetStream metadata of a message a Subscriber
// received: its stream, its sequence, how many times it was delivered.
func Metadata(m *message.Message) (*jetstream.MsgMetadata, error) {
	jm, ok := Msg(m)
	if !ok {
		return nil, errors.New("pubsub: not a message received from JetStream")
	}
	return jm.Metadata()
}
