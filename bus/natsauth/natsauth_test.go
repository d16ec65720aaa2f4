package natsauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

const tokens = `alice-token,alice,1
bob-token,bob,2
root-token,root,0,"pace:admins"
`

// env is a bus that authenticates as pace up's does, with alice's job
// "a1" and bob's job "b1" declared.
type env struct {
	url   string
	jobs  *natsauth.JobTokens
	admin *bus.Client // as the stages: may create consumers
}

// start starts the bus and Pace's manager, which makes consumers for
// readers (pace.control.read).
func start(t *testing.T) *env {
	t.Helper()
	a := bustest.Authenticated(t, tokens, map[string]string{"a1": "alice", "b1": "bob"})
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manager.New(manager.Deps{Bus: a.Admin}, manager.Config{}, manager.WithUsers(tf), manager.WithAuthenticator(tf))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, m.Run)
	return &env{url: a.Server.ClientURL(), jobs: a.Jobs, admin: a.Admin}
}

// reader asks the manager, as token's user, for a consumer reading filter
// of stream, and returns it.
func (r *raw) reader(t *testing.T, token, stream, filter string) (jetstream.Consumer, error) {
	t.Helper()
	req := nats.NewMsg("pace.control.read")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Data, _ = json.Marshal(map[string]string{"stream": stream, "filter_subject": filter})
	var reply *nats.Msg
	var err error
	bustest.Eventually(t, 30*time.Second, "the manager answers", func() bool {
		reply, err = r.nc.RequestMsg(req, 5*time.Second)
		return !errors.Is(err, nats.ErrNoResponders)
	})
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Stream, Consumer string
		APIPrefix        string `json:"api_prefix"`
		Code             int    `json:"error_code"`
		Message          string `json:"error_message"`
	}
	if err := json.Unmarshal(reply.Data, &answer); err != nil {
		t.Fatalf("reply %s: %v", reply.Data, err)
	}
	if answer.Code != 0 {
		return nil, fmt.Errorf("%d %s", answer.Code, answer.Message)
	}
	js, err := jetstream.NewWithAPIPrefix(r.nc, answer.APIPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return js.Consumer(context.Background(), answer.Stream, answer.Consumer)
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
	t.Parallel()
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
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	alice := e.mustConnect(t, "alice-token")

	// Its own job: push an item, store a result, read it.
	js, err := jetstream.New(alice.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "pace.work.a1", []byte(`{"id":"i1","payload":"x"}`)); err != nil {
		t.Errorf("push to own job: %v", err)
	}
	if _, err := js.Publish(ctx, "pace.results.a1.i1", []byte(`{"item_id":"i1","job":"a1","result":"X"}`)); err != nil {
		t.Errorf("result for own job: %v", err)
	}
	results, err := alice.reader(t, "alice-token", "PACE_RESULTS", "pace.results.a1.>")
	if err != nil {
		t.Fatalf("reader of own results: %v", err)
	}
	if msg, err := results.Next(); err != nil || msg.Subject() != "pace.results.a1.i1" {
		t.Errorf("own result: %v %v", msg, err)
	}
	// The manager makes readers of its own jobs only, and none that spans jobs.
	for filter, want := range map[string]string{"pace.results.b1.>": "404", "pace.results.*.>": "403",
		"pace.work.a1": "400", "pace.results.a1": "400"} {
		if _, err := alice.reader(t, "alice-token", "PACE_RESULTS", filter); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("reader of %s: %v, want %s", filter, err, want)
		}
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
		// Any consumer, even on its own job: a push consumer's deliver
		// subject, which permissions cannot see, would copy its messages
		// into any stream (pace.k8s.requests, a bucket), filling it.
		"$JS.API.CONSUMER.CREATE.PACE_RESULTS.x.pace.results.a1.>",
		"$JS.API.CONSUMER.DURABLE.CREATE.PACE_RESULTS.x",
		"$JS.API.CONSUMER.CREATE.PACE_WORK.work-a1.pace.work.a1",
		"$JS.API.CONSUMER.CREATE.KV_pace_jobs.x.$KV.pace_jobs.a1",
		"$JS.API.CONSUMER.LIST.PACE_RESULTS",                   // others' consumer names
		"$SYS.REQ.USER.AUTH",                                   // the authorization service
		"pace.control.fail",                                    // failing jobs: the stages' alone
		"$JS.API.CONSUMER.MSG.NEXT.PACE_METRICS.controller",    // a stage's messages
		"$JS.API.CONSUMER.DELETE.PACE_DECISIONS.pace-actuator", // a stage's consumer
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

// TestAReaderIsItsAskersAlone plays alice as a hostile tenant with nats.go
// alone, who knows the name of the consumer the manager made for bob to
// read his results: she can neither fetch from it, nor inspect or delete
// it, whether on $JS.API, through bob's reader prefix or through her own;
// bob cannot have the manager send his reader's messages anywhere but an
// inbox; and bob then reads his result through it.
func TestAReaderIsItsAskersAlone(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := testCtx(t)
	bob, alice := e.mustConnect(t, "bob-token"), e.mustConnect(t, "alice-token")
	bobJS, err := jetstream.New(bob.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bobJS.Publish(ctx, "pace.results.b1.i1", []byte(`{"item_id":"i1","job":"b1","result":"B"}`)); err != nil {
		t.Fatal(err)
	}
	reader, err := bob.reader(t, "bob-token", "PACE_RESULTS", "pace.results.b1.>")
	if err != nil {
		t.Fatal(err)
	}
	name := reader.CachedInfo().Name
	if !strings.HasPrefix(name, bus.CallerID("bob-token")+"-") || len(name) < 40 {
		t.Errorf("bob's reader is named %q, want his caller id and a random part", name)
	}

	// On $JS.API and through bob's reader prefix: refused by the server.
	bobs := bus.ReaderAPIPrefix(schemas.DefaultPrefix, bus.CallerID("bob-token"))
	for _, api := range []string{"$JS.API", bobs} {
		for _, op := range []string{"MSG.NEXT", "INFO", "DELETE"} {
			if subject := api + ".CONSUMER." + op + ".PACE_RESULTS." + name; !alice.refused(t, subject) {
				t.Errorf("alice may publish to %s", subject)
			}
		}
	}
	// Through her own: the manager answers as if it did not exist.
	aliceJS, err := jetstream.NewWithAPIPrefix(alice.nc, bus.ReaderAPIPrefix(schemas.DefaultPrefix, bus.CallerID("alice-token")))
	if err != nil {
		t.Fatal(err)
	}
	for name, stream := range map[string]string{name: "PACE_RESULTS", "pace-actuator": "PACE_DECISIONS"} {
		if _, err := aliceJS.Consumer(ctx, stream, name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("alice's info of %s: %v, want consumer not found", name, err)
		}
		if err := aliceJS.DeleteConsumer(ctx, stream, name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("alice's delete of %s: %v, want consumer not found", name, err)
		}
	}
	inbox := alice.nc.NewInbox()
	got, err := alice.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	own := bus.ReaderAPIPrefix(schemas.DefaultPrefix, bus.CallerID("alice-token")) + ".CONSUMER.MSG.NEXT.PACE_RESULTS." + name
	if err := alice.nc.PublishRequest(own, inbox, []byte(`{"batch":10,"expires":1000000000}`)); err != nil {
		t.Fatal(err)
	}
	// The answer a fetch from a consumer that does not exist gets.
	if msg, err := got.NextMsg(10 * time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("alice's fetch from bob's reader: %v %v, want no responders", msg, err)
	}

	// Bob may not have his reader's messages published outside an inbox:
	// into a stream, the manager would store them as his job's results.
	next := bobs + ".CONSUMER.MSG.NEXT.PACE_RESULTS." + name
	if err := bob.nc.PublishRequest(next, "pace.results.b1.copied", []byte(`{"batch":1,"no_wait":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := bob.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// Bob's reader is whole: it gives him his result, first.
	if msg, err := reader.Next(jetstream.FetchMaxWait(10 * time.Second)); err != nil || msg.Subject() != "pace.results.b1.i1" {
		t.Errorf("bob's result: %v %v", msg, err)
	}
	st, err := e.admin.JetStream().Stream(ctx, "PACE_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(ctx, "pace.results.b1.copied"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a reader's message copied into PACE_RESULTS: %v", err)
	}
}

func TestAJobTokenOpensOneJob(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	root := e.mustConnect(t, "root-token")
	for stream, filter := range map[string]string{"PACE_RESULTS": "pace.results.b1.>", "PACE_JOBS": "pace.jobs.*.>",
		"PACE_ADMISSION": "pace.admission.>"} {
		cons, err := root.reader(t, "root-token", stream, filter)
		if err == nil {
			_, err = cons.Info(ctx)
		}
		if err != nil {
			t.Errorf("reader of %s: %v", filter, err)
		}
	}
	for _, subject := range []string{"$KV.pace_jobs.a1", "pace.k8s.requests", "pace.jobs.b1.terminated"} {
		if !root.refused(t, subject) {
			t.Errorf("an admin may publish to %s", subject)
		}
	}
}

// The SDK reads a tenant's streams through consumers the manager makes, and
// when one is lost (unread for bus.ReaderIdle, or with a server) it goes on
// from the next message through a new one: nothing skipped, nothing twice.
func TestATenantReadsThroughTheManager(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := testCtx(t)
	alice, err := bus.Connect(ctx, e.url, bus.WithTokenAuth("alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = alice.Close(ctx) }()
	if err := alice.PushItems(ctx, "a1", bus.Items("x", "y")); err != nil {
		t.Fatal(err)
	}
	w, err := alice.Worker("a1", func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return strings.ToUpper(it.Payload), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, w.Run)
	bustest.Eventually(t, time.Minute, "both results read", func() bool {
		got, err := alice.Outputs().StoredResults(ctx, "a1")
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 2
	})

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next, stop := iter.Pull2(alice.Outputs().Results(fctx, "a1", bus.Follow()))
	defer stop()
	for range 2 {
		if _, err, ok := next(); err != nil || !ok {
			t.Fatalf("follow: %v %v", err, ok)
		}
	}
	// The reader's consumer is lost.
	results, err := e.admin.JetStream().Stream(ctx, "PACE_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	for name := range results.ConsumerNames(ctx).Name() {
		if err := results.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.PushItems(ctx, "a1", bus.Items("z")); err != nil {
		t.Fatal(err)
	}
	r, err, ok := next()
	if err != nil || !ok || r.Output != "Z" {
		t.Fatalf("after the reader was lost: %+v %v %v, want the third result", r, err, ok)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestAJobJustDeclaredIsAmongItsOwnersRights: a tenant who connects right
// after its job is written gets the rights to it: the authorization waits
// for its view of the jobs to catch up with the bucket.
func TestAJobJustDeclaredIsAmongItsOwnersRights(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := testCtx(t)
	e.mustConnect(t, "alice-token") // the service answers
	for i := range 20 {
		job := fmt.Sprintf("fresh%d", i)
		if _, err := e.admin.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
		alice := e.mustConnect(t, "alice-token")
		js, err := jetstream.New(alice.nc)
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second) // refused, the push gets no answer
		_, err = js.Publish(pctx, "pace.work."+job, []byte(`{"id":"i1","payload":"x"}`))
		cancel()
		if err != nil {
			t.Fatalf("%s: alice, connected after it was declared, could not push to it: %v", job, err)
		}
		alice.nc.Close()
	}
}
