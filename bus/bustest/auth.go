package bustest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
	natsconf "github.com/pace-platform/pace/deploy/nats"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// AuthBus is a bus that authenticates as pace up's does with a token file:
// the stages log in as the users of deploy/nats/auth.conf, tenants and
// workers by token through Pace's auth callout service.
type AuthBus struct {
	Server *bus.Server
	Admin  *bus.Client // pace-admin's, provisioned
	Jobs   *natsauth.JobTokens
}

// Authenticated starts an AuthBus on a loopback port whose service knows
// the users of tokens (a token file's lines), declares each job of owners
// (job → owner) as a streaming job, and returns once the service admits
// the token of tokens' first line. It stops when the test ends.
func Authenticated(t testing.TB, tokens string, owners map[string]string) *AuthBus {
	t.Helper()
	ctx := context.Background()
	users, passwords, err := natsconf.Users(schemas.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	serverAuth, issuer, err := natsauth.ServerAuth(users)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bus.StartServer(bus.ServerConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", MaxStore: 1 << 30,
		Auth: serverAuth}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	a := &AuthBus{Server: srv, Admin: Client(t, srv, bus.WithUserPassword("pace-admin", passwords["pace-admin"]))}
	for job, owner := range owners {
		if _, err := a.Admin.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	if a.Jobs, err = natsauth.NewJobTokens(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	Run(t, natsauth.New(a.Admin, issuer, tf, a.Jobs, nil).Run)
	first, _, _ := strings.Cut(tokens, ",")
	Eventually(t, time.Minute, "the authorization service answers", func() bool {
		nc, err := nats.Connect(srv.ClientURL(), nats.Token(first))
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return a
}
