package nats_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/auth"
	"github.com/pace-platform/pace/auth/natsauth"
	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	natsconf "github.com/pace-platform/pace/deploy/nats"
	"github.com/pace-platform/pace/schemas"
)

// calloutServer starts single.conf with auth.conf's auth_callout block
// uncommented, as docs/security.md says to enable tenants by token, and the
// authorization service on a pace-manager connection, as pace stage manager
// --nats-callout-key runs it. It returns the URL and the job tokens.
func calloutServer(t *testing.T) (string, *natsauth.JobTokens) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"single.conf", "limits.conf", "jetstream.conf", "auth.conf"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if f == "auth.conf" {
			conf, err := natsconf.CalloutAuthConf()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(conf, "\n  auth_callout {") || strings.Contains(conf, "pace-worker,") || strings.Contains(conf, "pace-client,") {
				t.Fatalf("auth.conf with the callout on:\n%s", conf)
			}
			data = []byte(conf)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	issuer, pub, err := natsauth.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NATS_HOST": "127.0.0.1", "NATS_PORT": "-1", "NATS_STORE_DIR": t.TempDir(),
		"PACE_NATS_CALLOUT_ISSUER": pub}
	for _, u := range users {
		env["PACE_NATS_"+strings.ToUpper(u)+"_PASSWORD"] = password(u)
	}
	url := start(t, load(t, filepath.Join(dir, "single.conf"), env)).ClientURL()
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
	tokens, err := auth.ParseTokens(strings.NewReader("alice-token,alice,1\nbob-token,bob,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := natsauth.NewJobTokens([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, natsauth.New(connect(t, ctx, url, "manager"), issuer, tokens, jobs, nil).Run)
	bustest.Eventually(t, time.Minute, "the authorization service answers", func() bool {
		nc, err := nats.Connect(url, nats.Token("alice-token"))
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return url, jobs
}

// TestAuthCalloutInDistributedMode: with the documented block, the stages
// keep logging in with their passwords, tenants and workers by token reach
// their own jobs only, and anything else is refused.
func TestAuthCalloutInDistributedMode(t *testing.T) {
	url, jobs := calloutServer(t)
	ctx := context.Background()

	// A stage user skips the callout.
	gate := connect(t, ctx, url, "gate")
	if _, _, err := gate.Job(ctx, "a1"); err != nil {
		t.Errorf("pace-gate reads a job: %v", err)
	}
	// Unauthenticated, unknown tokens, and the removed static users: refused.
	for name, opt := range map[string]nats.Option{"none": func(*nats.Options) error { return nil },
		"unknown token": nats.Token("mallory"), "pace-worker": nats.UserInfo("pace-worker", password("worker"))} {
		if nc, err := nats.Connect(url, opt); err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization violation", name, err)
		}
	}
	// A worker with its job's token stores its job's results, not another's.
	worker, err := bus.Connect(ctx, url, bus.WithTokenAuth(jobs.Mint("a1")))
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close(ctx) //nolint:errcheck // end of test
	if err := worker.PublishResult(ctx, &schemas.Result{Job: "a1", ItemID: "i1", Output: "ok", FinishedAt: time.Now()}); err != nil {
		t.Errorf("a1's worker stores a1's result: %v", err)
	}
	if err := worker.PublishResult(ctx, &schemas.Result{Job: "b1", ItemID: "i1", Output: "forged", FinishedAt: time.Now()}); err == nil {
		t.Error("a1's worker stored a result of b1")
	}
	// A tenant reads its job's results, not another tenant's.
	alice, err := bus.Connect(ctx, url, bus.WithTokenAuth("alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(ctx) //nolint:errcheck // end of test
	if got, err := alice.StoredResults(ctx, "a1"); err != nil || len(got) != 1 {
		t.Errorf("alice's results of a1 = %d, %v; want the one", len(got), err)
	}
	if _, err := alice.StoredResults(ctx, "b1"); !errors.Is(err, bus.ErrNotPermitted) {
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
