package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/schemas"
)

// ErrInvalidOption is wrapped by every error an Option returns.
var ErrInvalidOption = errors.New("invalid option")

// Option configures Connect and New.
type Option func(*options) error

type options struct {
	name       string
	prefix     schemas.Prefix
	log        *slog.Logger
	nats       []nats.Option
	connectMax time.Duration
	clock      clock.WithTicker
	// auth names the option that chose how to authenticate, "" for none:
	// credentials, nkey, user/password and token exclude each other.
	auth  string
	token string // the Pace token of WithTokenAuth
}

// setAuth records that the option named by mode authenticates the
// connection, refusing a second way of authenticating.
func (o *options) setAuth(mode string) error {
	if o.auth != "" {
		return fmt.Errorf("%w: %s and %s both authenticate; choose one", ErrInvalidOption, o.auth, mode)
	}
	o.auth = mode
	return nil
}

func buildOptions(opts []Option) (*options, error) {
	o := &options{
		prefix:     schemas.DefaultPrefix,
		log:        slog.New(slog.DiscardHandler),
		connectMax: 30 * time.Second,
		clock:      clock.RealClock{},
	}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// WithName names the connection as seen by the server (monitoring, logs).
func WithName(name string) Option {
	return func(o *options) error { o.name = name; return nil }
}

// WithClock sets the clock the client reads times from and waits on:
// items' and results' times, dead letters', presence, and the timers of
// leader election (whose leases the server still expires in real time);
// the default is the real clock.
func WithClock(clk clock.WithTicker) Option {
	return func(o *options) error { o.clock = clk; return nil }
}

// WithPrefix sets the subject prefix; the default is "pace".
func WithPrefix(p schemas.Prefix) Option {
	return func(o *options) error {
		if !p.Valid() {
			return fmt.Errorf("%w: prefix %q must be letters, digits, '-' or '_'", ErrInvalidOption, p)
		}
		o.prefix = p
		return nil
	}
}

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		o.log = l
		return nil
	}
}

// WithCredentials authenticates with a NATS credentials file (JWT + nkey).
// [Alternatives]: WithNkeyFile, WithUserPassword; only one may be given.
func WithCredentials(file string) Option {
	return func(o *options) error {
		if file == "" {
			return fmt.Errorf("%w: empty credentials file", ErrInvalidOption)
		}
		if err := o.setAuth("credentials file"); err != nil {
			return err
		}
		o.nats = append(o.nats, nats.UserCredentials(file))
		return nil
	}
}

// WithNkeyFile authenticates with the nkey whose seed (a line starting with
// "SU") is in file; the server's authorization lists the public key. The
// file is read at once, so a missing or malformed file fails here.
func WithNkeyFile(file string) Option {
	return func(o *options) error {
		if file == "" {
			return fmt.Errorf("%w: empty nkey seed file", ErrInvalidOption)
		}
		if err := o.setAuth("nkey"); err != nil {
			return err
		}
		opt, err := nats.NkeyOptionFromSeed(file)
		if err != nil {
			return fmt.Errorf("%w: nkey seed file %s: %w", ErrInvalidOption, file, err)
		}
		o.nats = append(o.nats, opt)
		return nil
	}
}

// WithUserPassword authenticates as user with password. The password is
// never logged; a user and password in the URL are redacted in logs and
// errors.
func WithUserPassword(user, password string) Option {
	return func(o *options) error {
		if user == "" || password == "" {
			return fmt.Errorf("%w: user and password go together and must not be empty", ErrInvalidOption)
		}
		if err := o.setAuth("user/password"); err != nil {
			return err
		}
		o.nats = append(o.nats, nats.UserInfo(user, password))
		return nil
	}
}

// WithTokenAuth authenticates with a Pace token: one from the HTTP API's token
// file, or a job's worker token (PACE_TOKEN in its workers' environment).
// The server hands it to Pace's authorization service (an auth callout),
// which grants that caller's permissions; replies then arrive under
// InboxPrefix(token), the only inboxes the caller may subscribe to. Submit,
// Stop and Terminate send it to the manager too, which identifies the
// caller by it. [Alternatives]: WithCredentials, WithNkeyFile,
// WithUserPassword.
func WithTokenAuth(token string) Option {
	return func(o *options) error {
		if token == "" {
			return fmt.Errorf("%w: empty token", ErrInvalidOption)
		}
		if err := o.setAuth("token"); err != nil {
			return err
		}
		o.token = token
		o.nats = append(o.nats, nats.Token(token), nats.CustomInboxPrefix(InboxPrefix(token)))
		return nil
	}
}

// InboxPrefix is the inbox prefix of a connection authenticated with token:
// "_INBOX." and its CallerID. A token's holder may subscribe there and
// nowhere else on _INBOX, so callers sharing the server cannot read each
// other's replies; clients in other languages set it themselves (nats CLI
// --inbox-prefix, nats.js inboxPrefix).
func InboxPrefix(token string) string { return CallerInbox(CallerID(token)) }

// CallerID names the holder of token on the bus: the first 16 hex digits of
// the token's SHA-256. The server's authorization service grants each
// caller rights under its id (its inboxes, its readers' API prefix), and
// the manager names the readers it makes for a caller after it (ReaderName).
func CallerID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// CallerInbox is the inbox prefix of the caller whose CallerID is caller.
func CallerInbox(caller string) string { return "_INBOX." + caller }

// WithTLS verifies the server with the CA file and, when certFile and keyFile
// are set, presents a client certificate. Empty caFile uses the system roots.
func WithTLS(caFile, certFile, keyFile string) Option {
	return func(o *options) error {
		if (certFile == "") != (keyFile == "") {
			return fmt.Errorf("%w: TLS certificate and key go together", ErrInvalidOption)
		}
		if caFile != "" {
			o.nats = append(o.nats, nats.RootCAs(caFile))
		}
		if certFile != "" {
			o.nats = append(o.nats, nats.ClientCert(certFile, keyFile))
		}
		o.nats = append(o.nats, nats.Secure())
		return nil
	}
}

// WithServer connects to an embedded server in-process, without TCP.
func WithServer(s *Server) Option {
	return func(o *options) error { o.nats = append(o.nats, s.InProcess()); return nil }
}

// WithConnectTimeout bounds how long Connect retries an unreachable server;
// zero retries until the context ends. The default is 30s.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: negative connect timeout", ErrInvalidOption)
		}
		o.connectMax = d
		return nil
	}
}
