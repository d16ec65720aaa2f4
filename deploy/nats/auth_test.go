package nats_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/stages/manager"
)

// users are the users of auth.conf, by the suffix of their password
// variable: Pace's stages and pace-admin.
var users = []string{"manager", "collector", "processor", "sink", "controller", "gate", "actuator",
	"visualizer", "admin"}

func password(user string) string { return "pw-" + user + "-not-a-secret" }

// The tenants' tokens, as the manager's --token-file holds them.
const (
	aliceToken = "alice-token"
	bobToken   = "bob-token"
	tokenFile  = aliceToken + ",alice,1\n" + bobToken + ",bob,2\n"
)

// authBus is single.conf on a random port: auth.conf's stage users, and its
// auth callout for everyone else.
type authBus struct {
	url    string
	issuer nkeys.KeyPair // signs the callout's answers; PACE_NATS_CALLOUT_ISSUER is its public key
	jobs   *natsauth.JobTokens
}

// authServer starts single.conf with auth.conf as shipped, the issuer of
// its callout a fresh account key.
func authServer(t *testing.T) *authBus {
	t.Helper()
	issuer, pub, err := natsauth.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := natsauth.NewJobTokens([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NATS_HOST": "127.0.0.1", "NATS_PORT": "-1", "NATS_STORE_DIR": t.TempDir(),
		"PACE_NATS_CALLOUT_ISSUER": pub}
	for _, u := range users {
		env["PACE_NATS_"+strings.ToUpper(u)+"_PASSWORD"] = password(u)
	}
	return &authBus{url: start(t, load(t, "single.conf", env)).ClientURL(), issuer: issuer, jobs: jobs}
}

// callout runs the authorization service and the manager on a pace-manager
// connection, as pace stage manager --nats-callout-key --token-file
// --job-token-key does,
// until the test ends, and returns once it admits a tenant. The bus must be
// provisioned; the owners of the jobs declared by then are known to the
// service from its first answer.
func (b *authBus) callout(t *testing.T) {
	t.Helper()
	b.calloutWith(t, manager.Config{})
}

// calloutWith is callout with the manager's settings cfg.
func (b *authBus) calloutWith(t *testing.T, cfg manager.Config) {
	t.Helper()
	tokens, err := auth.ParseTokens(strings.NewReader(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	mc := connect(t, context.Background(), b.url, "manager")
	bustest.Run(t, natsauth.New(mc, b.issuer, tokens, b.jobs, nil).Run)
	// The manager answers pace.control.read: tenants read through consumers it makes.
	m, err := manager.New(manager.Deps{Bus: mc}, cfg, manager.WithUsers(tokens), manager.WithAuthenticator(tokens))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, m.Run)
	bustest.Eventually(t, time.Minute, "the authorization service answers", func() bool {
		nc, err := nats.Connect(b.url, nats.Token(aliceToken))
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
}

// login is how a test connection authenticates: as a stage user of
// auth.conf with its password, or with a Pace token through the callout.
type login struct {
	name  string // for messages
	user  string // the stage, without a token
	token string
}

// stage is the login of pace-<name>.
func stage(name string) login { return login{name: "pace-" + name, user: name} }

// tokenLogin is the login of token's holder, called name.
func tokenLogin(name, token string) login { return login{name: name, token: token} }

func (l login) bus() bus.Option {
	if l.token != "" {
		return bus.WithTokenAuth(l.token)
	}
	return bus.WithUserPassword("pace-"+l.user, password(l.user))
}

// nats returns the options nats.go needs: a token's holder may subscribe
// only under its own inbox prefix.
func (l login) nats() []nats.Option {
	if l.token != "" {
		return []nats.Option{nats.Token(l.token), nats.CustomInboxPrefix(bus.InboxPrefix(l.token))}
	}
	return []nats.Option{nats.UserInfo("pace-"+l.user, password(l.user))}
}

// inbox is a subject under the login's reply prefix.
func (l login) inbox() string {
	if l.token != "" {
		return bus.InboxPrefix(l.token) + ".test"
	}
	return "_INBOX.test"
}

// connect connects as pace-<user> with the SDK.
func connect(t *testing.T, ctx context.Context, url, user string) *bus.Client {
	t.Helper()
	return connectAs(t, ctx, url, stage(user))
}

// connectAs connects with l with the SDK. A stage user's connection fails
// the test when the server refuses it anything: a stage's calls need no
// right its user of auth.conf lacks.
func connectAs(t *testing.T, ctx context.Context, url string, l login) *bus.Client {
	t.Helper()
	var h slog.Handler = slog.NewTextHandler(t.Output(), nil)
	if l.token == "" {
		h = &refusedRights{Handler: h, t: t, who: l.name}
	}
	c, err := bus.Connect(ctx, url, bus.WithName("test-"+l.name), bus.WithLogger(slog.New(h)),
		l.bus(), bus.WithConnectTimeout(time.Minute))
	if err != nil {
		t.Fatalf("connect as %s: %v", l.name, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	return c
}

// violations connects with l without the SDK and returns the connection
// with the permission violations the server reports.
func violations(t *testing.T, url string, l login) (*nats.Conn, <-chan string) {
	t.Helper()
	errs := make(chan string, 16)
	nc, err := nats.Connect(url, append(l.nats(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			errs <- err.Error()
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// checkDenied fails unless the server refuses each of l's publishes to pub
// and subscriptions to sub.
func checkDenied(t *testing.T, url string, l login, pub, sub []string) {
	t.Helper()
	nc, errs := violations(t, url, l)
	check := func(op, subject string) {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s to %q", op, subject)
		select {
		case got := <-errs:
			if !strings.Contains(got, want) {
				t.Errorf("%s: violation %q, want one for %s", l.name, got, want)
			}
		case <-time.After(time.Minute): // the violation ends the wait; it comes before the flush's PONG
			t.Errorf("%s: %s allowed", l.name, want)
		}
	}
	for _, s := range pub {
		if err := nc.Publish(s, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		check("Publish", s)
	}
	for _, s := range sub {
		if _, err := nc.SubscribeSync(s); err != nil {
			t.Fatal(err)
		}
		check("Subscription", s)
	}
}

// checkAllowedSubscriptions fails if the server refuses any of l's
// subscriptions to subjects.
func checkAllowedSubscriptions(t *testing.T, url string, l login, subjects ...string) {
	t.Helper()
	nc, errs := violations(t, url, l)
	for _, s := range subjects {
		if _, err := nc.SubscribeSync(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-errs:
		t.Errorf("%s: %s", l.name, got)
	case <-time.After(200 * time.Millisecond): // violations arrive before the flush's PONG
	}
}

// refusedRights is a slog handler failing its test on each permission
// violation the SDK logs: a call of a stage its user has no right to.
type refusedRights struct {
	slog.Handler
	t   *testing.T
	who string
}

func (h *refusedRights) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, nats.ErrPermissionViolation) {
			h.t.Errorf("%s lacks a right its calls need: %v", h.who, err)
		}
		return true
	})
	return h.Handler.Handle(ctx, r)
}

func (h *refusedRights) WithAttrs(as []slog.Attr) slog.Handler {
	return &refusedRights{Handler: h.Handler.WithAttrs(as), t: h.t, who: h.who}
}

func (h *refusedRights) WithGroup(name string) slog.Handler {
	return &refusedRights{Handler: h.Handler.WithGroup(name), t: h.t, who: h.who}
}
