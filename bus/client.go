package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// Client is a connection to Pace's bus. It is safe for concurrent use.
type Client struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	prefix schemas.Prefix
	log    *slog.Logger
	now    func() time.Time
}

// Connect connects to the NATS server at url, retrying with exponential
// backoff while it is unreachable (see WithConnectTimeout), and reconnecting
// forever once connected. With WithServer the url may be empty.
func Connect(ctx context.Context, url string, opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	log := o.log
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
	}, o.nats...)

	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = o.connectMax
	var nc *nats.Conn
	err = backoff.RetryNotify(func() error {
		var err error
		nc, err = nats.Connect(url, nopts...)
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx), func(err error, next time.Duration) {
		log.Warn("nats unreachable, retrying", "url", url, "err", err, "retry_in", next)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to nats %s: %w", url, ctx.Err())
		}
		return nil, fmt.Errorf("connect to nats %s: %w", url, err)
	}
	c, err := newClient(nc, o)
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
	return newClient(nc, o)
}

func newClient(nc *nats.Conn, o *options) (*Client, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Client{nc: nc, js: js, prefix: o.prefix, log: o.log, now: o.now}, nil
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
