package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/rediswq"
	"github.com/pace-platform/pace/schemas"
)

// natsFlags are the connection flags of every client command.
type natsFlags struct {
	url, creds, token      string
	user, password, nkey   string
	tlsCA, tlsCert, tlsKey string
	prefix                 string
	connectTimeout         time.Duration
}

// authenticated reports whether the connection logs in as a user of the
// server (a stage's), so that the bus authenticates its users.
func (f *natsFlags) authenticated() bool { return f.user != "" || f.nkey != "" || f.creds != "" }

func (f *natsFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "nats", "nats://127.0.0.1:4222", "NATS server URL (the one 'pace up' prints)")
	_ = fs.SetAnnotation("nats", envAnnotation, []string{"PACE_NATS_URL"})
	fs.StringVar(&f.token, "token", "", "Pace token: one of pace up's --token-file, or a job's worker token (PACE_TOKEN of the workers Pace starts)")
	fs.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT and nkey seed)")
	fs.StringVar(&f.nkey, "nats-nkey", "", "NATS nkey seed file (alternative to --nats-creds and --nats-user)")
	fs.StringVar(&f.user, "nats-user", "", "NATS user name, with --nats-password")
	fs.StringVar(&f.password, "nats-password", "", "NATS password; prefer the environment variable, which ps does not show")
	fs.StringVar(&f.tlsCA, "nats-ca", "", "CA file that verifies the NATS server (enables TLS)")
	fs.StringVar(&f.tlsCert, "nats-cert", "", "client certificate file for NATS TLS")
	fs.StringVar(&f.tlsKey, "nats-key", "", "client key file for NATS TLS")
	fs.StringVar(&f.prefix, "prefix", string(schemas.DefaultPrefix), "subject prefix of the Pace installation")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 30*time.Second, "how long to retry an unreachable NATS server (0 = forever)")
}

// jobClient is the Redis front's Opener when workers get job tokens: each
// queue's connection has the flags' server and TLS settings and logs in
// with its job's token, not with the stage's credentials.
func (f *natsFlags) jobClient(a *app) rediswq.Opener {
	return func(ctx context.Context, token string) (*bus.Client, func(), error) {
		jf := *f
		jf.creds, jf.nkey, jf.user, jf.password, jf.token = "", "", "", "", token
		c, err := jf.connect(ctx, a, "pace-redis")
		if err != nil {
			return nil, nil, err
		}
		return c, func() { closeClient(c) }, nil
	}
}

// connect connects with the flags' settings, logging retries with a.
func (f *natsFlags) connect(ctx context.Context, a *app, name string) (*bus.Client, error) {
	modes := 0
	for _, v := range []string{f.creds, f.nkey, f.user + f.password, f.token} {
		if v != "" {
			modes++
		}
	}
	if modes > 1 {
		return nil, usageError("--token, --nats-creds, --nats-nkey and --nats-user/--nats-password exclude each other: choose one way to authenticate")
	}
	if err := checkNATSURLs(f.url); err != nil {
		return nil, err
	}
	opts := []bus.Option{bus.WithName(name), bus.WithLogger(a.log), bus.WithConnectTimeout(f.connectTimeout)}
	if f.prefix != string(schemas.DefaultPrefix) {
		opts = append(opts, bus.WithPrefix(schemas.Prefix(f.prefix)))
	}
	if f.token != "" {
		opts = append(opts, bus.WithTokenAuth(f.token))
	}
	if f.creds != "" {
		opts = append(opts, bus.WithCredentials(f.creds))
	}
	if f.nkey != "" {
		opts = append(opts, bus.WithNkeyFile(f.nkey))
	}
	if f.user != "" || f.password != "" {
		opts = append(opts, bus.WithUserPassword(f.user, f.password))
	}
	if f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" {
		opts = append(opts, bus.WithTLS(f.tlsCA, f.tlsCert, f.tlsKey))
	}
	c, err := bus.Connect(ctx, f.url, opts...)
	if errors.Is(err, bus.ErrInvalidOption) {
		return nil, usageError("%v", err)
	}
	if errors.Is(err, bus.ErrNoServers) {
		err = fmt.Errorf("%w (is Pace running? 'pace up' prints the URL for --nats or PACE_NATS_URL)", err)
	}
	if errors.Is(err, nats.ErrAuthorization) && modes == 0 {
		err = fmt.Errorf("%w (this bus authenticates: give your Pace token with --token or PACE_TOKEN)", err)
	}
	if err != nil {
		return nil, signalled(ctx, err)
	}
	return c, nil
}

// checkNATSURLs refuses a --nats list with an unknown scheme at once,
// instead of retrying a dial that cannot succeed. A URL without a scheme
// is nats://, as nats.go reads it.
func checkNATSURLs(urls string) error {
	for u := range strings.SplitSeq(urls, ",") {
		scheme, rest, ok := strings.Cut(strings.TrimSpace(u), "://")
		if !ok {
			scheme, rest = "nats", strings.TrimSpace(u)
		}
		switch {
		case scheme != "nats" && scheme != "tls" && scheme != "ws" && scheme != "wss":
			return usageError("--nats %q: want nats://, tls://, ws:// or wss:// URLs, comma-separated", bus.RedactURLs(urls))
		case rest == "":
			return usageError("--nats %q: a URL has no host", bus.RedactURLs(urls))
		}
	}
	return nil
}

// closeClient drains c within a few seconds.
func closeClient(c *bus.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
