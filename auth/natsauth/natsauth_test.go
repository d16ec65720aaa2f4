package natsauth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/auth/natsauth"
	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
)

const tokens = `alice-token,alice,1
bob-token,bob,2
root-token,root,0,"pace:admins"
`

// env is a bus that authenticates as pace up's does, with alice's job
// "a1" and bob's job "b1" declared.
type env struct {
	url  string
	jobs *natsauth.JobTokens
}

func start(t *testing.T) *env {
	t.Helper()
	a := bustest.Authenticated(t, tokens, map[string]string{"a1": "alice", "b1": "bob"})
	return &env{url: a.Server.ClientURL(), jobs: a.Jobs}
}

// raw is a careless or hostile client: nats.go alone, no Pace SDK.
type raw struct {
	nc     *nats.Conn
	errors chan error
}

func (e *env) connect(t *testing.T, token string) (*raw, error) {
	t.Helper()
	r := &raw{errors: make(chan error, 64)}
	var err error
	r.nc, err = nats.Connect(e.url, nats.Token(token), nats.CustomInboxPrefix(bus.InboxPrefix(token)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { r.errors <- err }))
	if err != nil {
		return nil, err
	}
	t.Cleanup(r.nc.Close)
	return r, nil
}

func (e *env) mustConnect(t *testing.T, token string) *raw {
	t.Helper()
	r, err := e.connect(t, token)
	if err != nil {
		t.Fatalf("connect with %q: %v", token, err)
	}
	return r
}

// refused reports whether the server refuses a publish to subject with a
// permission violation.
func (r *raw) refused(t *testing.T, subject string) bool {
	t.Helper()
	if err := r.nc.Publish(subject, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	return r.violation(t, subject)
}

// violation reports whether the server answers what was sent with a
// permission violation naming subject. The server answers before the pong of
// a flush, but nats.go reports it asynchronously: a refusal is awaited for
// 10 s at most, a loaded machine's bound, not a timing assertion.
func (r *raw) violation(t *testing.T, subject string) bool {
	t.Helper()
	if err := r.nc.FlushTimeout(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case err := <-r.errors:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func TestConnectionsWithoutAValidTokenAreRefused(t *testing.T) {
	e := start(t)
	forged := strings.Replace(e.jobs.Mint("a1"), "a1", "b1", 1) // alice's worker token, relabelled
	for name, token := range map[string]string{"none": "", "unknown": "mallory-token", "forged job token": forged,
		"job token of another key": "job:a1:AAAA"} {
		t.Run(name, func(t *testing.T) {
			opts := []nats.Option{}
			if token != "" {
				opts = append(opts, nats.Token(token))
			}
			nc, err := nats.Connect(e.url, opts...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("err = %v, want an authorization violation", err)
			}
		})
	}
}

func TestATenantReachesItsOwnJobsOnly(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	alice := e.mustConnect(t, "alice-token")

	// Its own job: push an item, read its results.
	js, err := jetstream.New(alice.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "pace.work.a1", []byte(`{"id":"i1","payload":"x"}`)); err != nil {
		t.Errorf("push to own job: %v", err)
	}
	results, err := js.OrderedConsumer(ctx, "PACE_RESULTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"pace.results.a1.*"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := results.Info(ctx); err != nil {
		t.Errorf("read own results: %v", err)
	}

	for _, subject := range []string{
		"pace.work.b1",                          // another tenant's queue
		"pace.work.never-created",               // a job that does not exist
		"pace.results.b1.i1",                    // a result for another job
		"$KV.pace_jobs.a1",                      // job records, even its own
		"$KV.pace_jobs.evil",                    // a job with any command
		"pace.k8s.requests",                     // infrastructure requests
		"pace.jobs.a1.terminated",               // job events, even its own
		"pace.decisions.a1",                     // decisions
		"$KV.pace_flowcontrol.flowschemas.x",    // APF configuration
		"$JS.API.STREAM.DELETE.PACE_WORK",       // stream administration
		"$JS.API.STREAM.PURGE.PACE_RESULTS",     //
		"$JS.API.DIRECT.GET.KV_pace_clusters.>", // cluster kubeconfigs
		"$JS.API.DIRECT.GET.KV_pace_jobs.$KV.pace_jobs.b1",
		"$JS.API.CONSUMER.CREATE.PACE_RESULTS.x.pace.results.b1.>", // bob's results
		"$JS.API.CONSUMER.CREATE.PACE_RESULTS.x",                   // a filter the server cannot see
		"$JS.API.CONSUMER.CREATE.PACE_WORK.work-b1.pace.work.b1",   // bob's items
		"$JS.API.CONSUMER.LIST.PACE_RESULTS",                       // others' consumer names
		"$SYS.REQ.USER.AUTH",                                       // the authorization service
		"$JS.API.CONSUMER.MSG.NEXT.PACE_METRICS.controller",        // a stage's messages
		"$JS.API.CONSUMER.DELETE.PACE_DECISIONS.pace-actuator",     // a stage's consumer
		"$JS.API.CONSUMER.CREATE.PACE_JOBS.pace-actuator-events.pace.jobs.a1.>",
	} {
		if !alice.refused(t, subject) {
			t.Errorf("alice may publish to %s", subject)
		}
	}
	// Nobody's replies but its own.
	for _, subject := range []string{">", "_INBOX.>", bus.InboxPrefix("bob-token") + ".>", "pace.results.b1.*", "$SYS.REQ.USER.AUTH"} {
		if _, err := alice.nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		if !alice.violation(t, subject) {
			t.Errorf("alice may subscribe to %s", subject)
		}
	}
}

func TestAJobTokenOpensOneJob(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	w := e.mustConnect(t, e.jobs.Mint("a1"))
	js, err := jetstream.New(w.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "pace.results.a1.i1", []byte(`{}`)); err != nil {
		t.Errorf("result for its job: %v", err)
	}
	for _, subject := range []string{"pace.results.b1.i1", "pace.dead.b1", "pace.work.a1", "pace.submit",
		"$KV.pace_workers.b1.w", "$JS.API.CONSUMER.MSG.NEXT.PACE_WORK.work-b1"} {
		if !w.refused(t, subject) {
			t.Errorf("a1's worker may publish to %s", subject)
		}
	}
}

func TestAnAdminReadsEveryJob(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	root := e.mustConnect(t, "root-token")
	js, err := jetstream.New(root.nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"a1", "b1"} {
		results, err := js.OrderedConsumer(ctx, "PACE_RESULTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"pace.results." + job + ".*"}})
		if err == nil {
			_, err = results.Info(ctx)
		}
		if err != nil {
			t.Errorf("results of %s: %v", job, err)
		}
	}
	for _, subject := range []string{"$KV.pace_jobs.a1", "pace.k8s.requests", "pace.jobs.b1.terminated"} {
		if !root.refused(t, subject) {
			t.Errorf("an admin may publish to %s", subject)
		}
	}
}
