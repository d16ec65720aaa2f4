package bus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/schemas"
)

// Client is a connection to Pace's bus. It is safe for concurrent use.
type Client struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	prefix schemas.Prefix
	log    *slog.Logger
	clk    clock.WithTicker
	token  string // sent to the manager with each call, if set
	denied *refusals
	// readers reads the consumers a read opens: through the caller's
	// ReaderAPIPrefix with a token, else js.
	readers jetstream.JetStream

	malformed *malformedEvents // job events that could not be decoded

	kvMu   sync.Mutex
	jobs   jetstream.KeyValue // the jobs bucket, once opened; guarded by kvMu
	listed jobListing         // what Jobs read last; guarded by kvMu
	// jobsSeen counts the changes to the jobs bucket this client knows of
	// (its own writes, and what its watch of the bucket saw); watching is
	// whether that watch runs. See Jobs.
	jobsSeen atomic.Uint64
	watching atomic.Bool

	work      workStreams // the layout of work streams, read once
	streamsMu sync.Mutex
	handles   map[schemas.Stream]jetstream.Stream // looked up by Stream; guarded by streamsMu

	// life ends with Close: the work the client runs on its own (the jobs
	// bucket's watch) stops with it.
	life    context.Context
	endLife context.CancelFunc
}

// ErrNotPermitted is wrapped by the error of a call the server refused for
// want of permission, such as reading a job the token does not own.
var ErrNotPermitted = errors.New("not permitted")

// refusals passes the server's permission violations on a connection to
// the calls waiting on it (guard): a refused request is not answered, and
// would otherwise wait for its timeout.
type refusals struct {
	mu      sync.Mutex
	next    int
	waiting map[int]context.CancelCauseFunc
}

func (r *refusals) add(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.waiting {
		cancel(fmt.Errorf("%w: %w", ErrNotPermitted, err))
	}
}

// guard returns ctx, ended as soon as the server refuses a publish of this
// connection, with a cause wrapping ErrNotPermitted (see notPermitted).
// Call done when the guarded calls are over.
func (c *Client) guard(ctx context.Context) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	r := c.denied
	r.mu.Lock()
	id := r.next
	r.next++
	if r.waiting == nil {
		r.waiting = map[int]context.CancelCauseFunc{}
	}
	r.waiting[id] = cancel
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
		cancel(nil)
	}
}

// notPermitted explains err, the failure of calls guarded by ctx: when the
// server refused one of their publishes, it says so and wraps
// ErrNotPermitted. Otherwise it returns err.
func notPermitted(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if err == nil || !errors.Is(cause, ErrNotPermitted) {
		return err
	}
	refused := cause.Error()
	if _, quoted, ok := strings.Cut(refused, `"`); ok {
		refused, _, _ = strings.Cut(quoted, `"`)
	}
	return fmt.Errorf("%w: %w: the server refused %s: does the job exist, and does this token own it?",
		ErrNotPermitted, err, refused)
}

// ErrNoServers is wrapped by Connect's error when no server of url could
// be reached.
var ErrNoServers = nats.ErrNoServers

// Connect connects to the NATS server at url, retrying with exponential
// backoff while it is unreachable (see WithConnectTimeout), and reconnecting
// forever once connected. With WithServer the url may be empty.
func Connect(ctx context.Context, url string, opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	log := o.log
	shown := RedactURLs(url)
	malformed := newMalformedEvents()
	denied := &refusals{}
	nopts := append([]nats.Option{
		nats.Name(o.name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		// Permission violations and slow-consumer reports arrive here, not
		// at the call that caused them; the subject is in err.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				malformed.refused(err)
				denied.add(err)
			}
			if sub != nil {
				log.Warn("nats error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("nats error", "err", err)
		}),
	}, o.nats...)

	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = o.connectMax
	var nc *nats.Conn
	err = backoff.RetryNotify(func() error {
		var err error
		nc, err = nats.Connect(url, nopts...)
		if refused(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx), func(err error, next time.Duration) {
		log.Warn("nats unreachable, retrying", "url", shown, "err", err, "retry_in", next.String())
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to nats %s: %w", shown, ctx.Err())
		}
		return nil, fmt.Errorf("connect to nats %s: %w", shown, err)
	}
	c, err := newClient(nc, o, malformed, denied)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// New wraps an established connection. Close on the client drains nc.
func New(nc *nats.Conn, opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return newClient(nc, o, newMalformedEvents(), &refusals{})
}

func newClient(nc *nats.Conn, o *options, malformed *malformedEvents, denied *refusals) (*Client, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(publishWindowSize))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	js = sizedPublisher{JetStream: js, nc: nc}
	readers := js
	if o.token != "" {
		if readers, err = jetstream.NewWithAPIPrefix(nc, ReaderAPIPrefix(o.prefix, CallerID(o.token))); err != nil {
			return nil, fmt.Errorf("jetstream: %w", err)
		}
	}
	life, endLife := context.WithCancel(context.Background())
	return &Client{nc: nc, js: js, readers: readers, prefix: o.prefix, log: o.log, clk: o.clock, malformed: malformed,
		denied: denied, token: o.token, life: life, endLife: endLife}, nil
}

// sizedPublisher names the sizes when a publish is refused for exceeding
// the server's max_payload. nats.go refuses such a message at once, without
// sending it, but its error says neither how large the message was nor the
// limit.
type sizedPublisher struct {
	jetstream.JetStream
	nc *nats.Conn
}

func (p sizedPublisher) Publish(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := p.JetStream.Publish(ctx, subj, data, opts...)
	return ack, p.sizeError(&nats.Msg{Subject: subj, Data: data}, err)
}

func (p sizedPublisher) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := p.JetStream.PublishMsg(ctx, m, opts...)
	return ack, p.sizeError(m, err)
}

func (p sizedPublisher) PublishAsync(subj string, data []byte, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := p.JetStream.PublishAsync(subj, data, opts...)
	return f, p.sizeError(&nats.Msg{Subject: subj, Data: data}, err)
}

func (p sizedPublisher) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := p.JetStream.PublishMsgAsync(m, opts...)
	return f, p.sizeError(m, err)
}

// sizeError adds the message's size and the limit to a max-payload error;
// other errors pass unchanged. Headers count as nats.go counts them.
func (p sizedPublisher) sizeError(m *nats.Msg, err error) error {
	if !errors.Is(err, nats.ErrMaxPayload) {
		return err
	}
	size := len(m.Data)
	if len(m.Header) > 0 {
		size += len("NATS/1.0\r\n\r\n")
		for k, vs := range m.Header {
			for _, v := range vs {
				size += len(k) + len(": \r\n") + len(v)
			}
		}
	}
	return fmt.Errorf("message to %s of %d bytes exceeds the server's max_payload of %d bytes: %w",
		m.Subject, size, p.nc.MaxPayload(), err)
}

// Conn returns the underlying NATS connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// JetStream returns the JetStream handle, for what the SDK does not cover.
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// Prefix returns the subject prefix.
func (c *Client) Prefix() schemas.Prefix { return c.prefix }

// Close waits for pending asynchronous publishes (bounded by ctx), then
// drains the connection so that in-flight messages are delivered.
func (c *Client) Close(ctx context.Context) error {
	defer c.endLife()
	select {
	case <-c.js.PublishAsyncComplete():
	case <-ctx.Done():
		c.log.Warn("closing with unacknowledged publishes", "pending", c.js.PublishAsyncPending())
	}
	if c.nc.IsClosed() {
		return nil
	}
	closed := make(chan struct{})
	c.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := c.nc.Drain(); err != nil {
		c.nc.Close()
		return fmt.Errorf("drain nats: %w", err)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		c.nc.Close()
	}
	return nil
}

// refused reports whether err means the server will not accept this
// client however long it retries: bad credentials or an untrusted
// certificate.
func refused(err error) bool {
	var certErr *tls.CertificateVerificationError
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.As(err, &certErr)
}

// RedactURLs hides the credentials of a comma-separated list of NATS URLs,
// for logs and errors; Connect applies it to everything it logs or returns: nats://pace:secret@host becomes nats://pace:xxxxx@host,
// and a token or nkey standing alone before the @ becomes xxxxx.
func RedactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		at := strings.LastIndex(p, "@")
		if at < 0 {
			continue
		}
		u, err := neturl.Parse(strings.TrimSpace(p))
		if err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				parts[i] = u.Redacted()
				continue
			}
		}
		scheme := ""
		if j := strings.Index(p, "://"); j >= 0 && j < at {
			scheme = p[:j+3]
		}
		parts[i] = scheme + "xxxxx" + p[at:]
	}
	return strings.Join(parts, ",")
}
