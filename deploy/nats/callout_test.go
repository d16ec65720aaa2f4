package nats_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
	natsconf "github.com/pace-platform/pace/deploy/nats"
	"github.com/pace-platform/pace/schemas"
)

// TestAuthUsersAreTheStageUsers checks auth.conf's callout: on, trusting
// the issuer of PACE_NATS_CALLOUT_ISSUER, and skipped by exactly the users
// it defines (a user missing from auth_users would be handed to the
// callout, which knows no password), which are those of Users, pace up's.
func TestAuthUsersAreTheStageUsers(t *testing.T) {
	_, pub, err := natsauth.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NATS_HOST": "127.0.0.1", "NATS_PORT": "-1", "NATS_STORE_DIR": t.TempDir(),
		"PACE_NATS_CALLOUT_ISSUER": pub}
	for _, u := range users {
		env["PACE_NATS_"+strings.ToUpper(u)+"_PASSWORD"] = password(u)
	}
	opts := load(t, "single.conf", env)
	if opts.AuthCallout == nil || opts.AuthCallout.Issuer != pub {
		t.Fatalf("auth callout %+v, want one trusting PACE_NATS_CALLOUT_ISSUER %s", opts.AuthCallout, pub)
	}
	var names []string
	for _, u := range opts.Users {
		names = append(names, u.Username)
	}
	if got := slices.Sorted(slices.Values(opts.AuthCallout.AuthUsers)); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Errorf("auth_users %v, want the users of auth.conf %v", got, names)
	}
	want := make([]string, len(users))
	for i, u := range users {
		want[i] = "pace-" + u
	}
	if !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(want))) {
		t.Errorf("users %v, want the stages and pace-admin %v", names, want)
	}
	embedded, _, err := natsconf.Users(schemas.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range embedded {
		got = append(got, u.Username)
	}
	if !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Errorf("Users (pace up's) = %v, want auth.conf's %v", got, names)
	}
}

// TestAuthCalloutInDistributedMode: with auth.conf as shipped, the stages
// log in with their passwords, tenants and workers by token reach their
// own jobs only, and anything else is refused, the static users
// pace-worker and pace-client of earlier versions included.
func TestAuthCalloutInDistributedMode(t *testing.T) {
	b := authServer(t)
	url := b.url
	ctx := context.Background()
	admin := connect(t, ctx, url, "admin")
	if err := admin.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	for job, owner := range map[string]string{"a1": "alice", "b1": "bob"} {
		if _, err := admin.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	b.callout(t)

	// A stage user skips the callout.
	gate := connect(t, ctx, url, "gate")
	if _, _, err := gate.Jobs().Get(ctx, "a1"); err != nil {
		t.Errorf("pace-gate reads a job: %v", err)
	}
	// Unauthenticated, unknown tokens, a stage's user with a wrong password,
	// and the removed static users: refused.
	for name, opt := range map[string]nats.Option{"none": func(*nats.Options) error { return nil },
		"unknown token": nats.Token("mallory"), "pace-gate with a wrong password": nats.UserInfo("pace-gate", "guess"),
		"pace-worker": nats.UserInfo("pace-worker", password("worker")),
		"pace-client": nats.UserInfo("pace-client", password("client"))} {
		if nc, err := nats.Connect(url, opt); err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization violation", name, err)
		}
	}
	// A worker with its job's token stores its job's results, not another's
	// (a result for an item the job was queued: the manager sets aside any
	// other).
	if _, err := admin.JetStream().Publish(ctx, "pace.work.a1", []byte(`{"id":"i1","job":"a1","payload":"x"}`)); err != nil {
		t.Fatal(err)
	}
	worker := connectAs(t, ctx, url, tokenLogin("a1's worker", b.jobs.Mint("a1")))
	if err := worker.PublishResult(ctx, &schemas.Result{Job: "a1", ItemID: "i1", Output: "ok", FinishedAt: time.Now()}); err != nil {
		t.Errorf("a1's worker stores a1's result: %v", err)
	}
	if err := worker.PublishResult(ctx, &schemas.Result{Job: "b1", ItemID: "i1", Output: "forged", FinishedAt: time.Now()}); err == nil {
		t.Error("a1's worker stored a result of b1")
	}
	// A tenant reads its job's results, not another tenant's.
	alice := connectAs(t, ctx, url, tokenLogin("alice", aliceToken))
	if got, err := alice.Outputs().StoredResults(ctx, "a1"); err != nil || len(got) != 1 {
		t.Errorf("alice's results of a1 = %d, %v; want the one", len(got), err)
	}
	if _, err := alice.Outputs().StoredResults(ctx, "b1"); !errors.Is(err, bus.ErrNotPermitted) {
		t.Errorf("alice reads b1's results: %v, want ErrNotPermitted", err)
	}
	js, err := jetstream.New(alice.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "pace.k8s.requests", []byte("{}")); err == nil {
		t.Error("alice published an infrastructure request")
	}
}
