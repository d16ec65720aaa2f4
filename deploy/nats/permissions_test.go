package nats_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/visualizer"
)

// users are the users of auth.conf, by the suffix of their password variable.
var users = []string{"manager", "collector", "processor", "sink", "controller", "gate", "actuator",
	"visualizer", "worker", "client", "admin"}

func password(user string) string { return "pw-" + user + "-not-a-secret" }

// authServer starts single.conf (auth.conf's users) on a random port.
func authServer(t *testing.T) string {
	t.Helper()
	env := map[string]string{"NATS_HOST": "127.0.0.1", "NATS_PORT": "-1", "NATS_STORE_DIR": t.TempDir()}
	for _, u := range users {
		env["PACE_NATS_"+strings.ToUpper(u)+"_PASSWORD"] = password(u)
	}
	return start(t, load(t, "single.conf", env)).ClientURL()
}

// connect connects as pace-<user> with the SDK.
func connect(t *testing.T, ctx context.Context, url, user string) *bus.Client {
	t.Helper()
	c, err := bus.Connect(ctx, url, bus.WithName("test-"+user), bus.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))),
		bus.WithUserPassword("pace-"+user, password(user)), bus.WithConnectTimeout(time.Minute))
	if err != nil {
		t.Fatalf("connect as pace-%s: %v", user, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	return c
}

// violations connects as pace-<user> without the SDK and returns the
// connection with the permission violations the server reports.
func violations(t *testing.T, url, user string) (*nats.Conn, <-chan string) {
	t.Helper()
	errs := make(chan string, 16)
	nc, err := nats.Connect(url, nats.UserInfo("pace-"+user, password(user)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				errs <- err.Error()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// checkDenied fails unless the server refuses each of user's publishes to
// pub and subscriptions to sub.
func checkDenied(t *testing.T, url, user string, pub, sub []string) {
	t.Helper()
	nc, errs := violations(t, url, user)
	check := func(op, subject string) {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s to %q", op, subject)
		select {
		case got := <-errs:
			if !strings.Contains(got, want) {
				t.Errorf("pace-%s: violation %q, want one for %s", user, got, want)
			}
		case <-time.After(time.Minute): // the violation ends the wait; it comes before the flush's PONG
			t.Errorf("pace-%s: %s allowed", user, want)
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

// checkAllowedSubscriptions fails if the server refuses any of user's
// subscriptions to subjects.
func checkAllowedSubscriptions(t *testing.T, url, user string, subjects ...string) {
	t.Helper()
	nc, errs := violations(t, url, user)
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
		t.Errorf("pace-%s: %s", user, got)
	case <-time.After(200 * time.Millisecond): // violations arrive before the flush's PONG
	}
}

// fetch creates (or updates) a durable consumer on stream and fetches one
// message.
func fetch(ctx context.Context, c *bus.Client, stream string, cfg jetstream.ConsumerConfig) (jetstream.Msg, error) {
	cfg.AckPolicy = jetstream.AckExplicitPolicy
	cons, err := c.JetStream().CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", cfg.Durable, stream, err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Minute)) // the message ends the wait
	if err != nil {
		return nil, err
	}
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if msg == nil && batch.Error() != nil {
		return nil, fmt.Errorf("no message from %s: %w", stream, batch.Error())
	}
	if msg == nil {
		return nil, fmt.Errorf("no message from %s", stream)
	}
	return msg, nil
}

// fetchOne fetches one message from stream (see fetch) and acknowledges it.
func fetchOne(ctx context.Context, c *bus.Client, stream string, cfg jetstream.ConsumerConfig) error {
	m, err := fetch(ctx, c, stream, cfg)
	if err != nil {
		return err
	}
	if err := m.DoubleAck(ctx); err != nil {
		return fmt.Errorf("ack on %s: %w", stream, err)
	}
	return nil
}

// setAside fetches one message from stream (see fetch) and sets it aside as
// stage does with one it cannot read; reader, a user that may read dead
// letters, must then find its letter.
func setAside(ctx context.Context, c, reader *bus.Client, stage, stream string, cfg jetstream.ConsumerConfig) error {
	m, err := fetch(ctx, c, stream, cfg)
	if err != nil {
		return err
	}
	md, err := m.Metadata()
	if err != nil {
		return err
	}
	// A refused letter is never acknowledged: SetAside waits until its
	// context ends, then asks for the message again. A kept one ends the
	// wait, which a slow machine must not cut short.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c.SetAside(sctx, stage, m, errors.New("test: unreadable"))
	for l, err := range reader.Letters(ctx, bus.DeadMessages, "*", false) {
		if err != nil {
			return err
		}
		if l.Subject == m.Subject() && l.Sequence == md.Sequence.Stream {
			return nil
		}
	}
	return fmt.Errorf("no dead letter of %s sequence %d", m.Subject(), md.Sequence.Stream)
}

// publish stores m on subject with JetStream, as the stages do.
func publish(ctx context.Context, c *bus.Client, subject string, m schemas.Message) error {
	msg, err := bus.NewMsg(ctx, subject, m)
	if err != nil {
		return err
	}
	_, err = c.JetStream().PublishMsg(ctx, msg)
	return err
}

// readJobEvents reads job's stored events as the manager's recovery does.
func readJobEvents(ctx context.Context, c *bus.Client, job string) error {
	for _, err := range c.JobEvents(ctx, job, false) {
		if err != nil {
			return err
		}
	}
	return nil
}

// setAsideJobEvent is what a reader of job events needs to set aside one it
// cannot decode: read job's events and their dead letters (the garbled one
// is found kept), and store a dead letter.
func setAsideJobEvent(ctx context.Context, c *bus.Client, job string) error {
	if err := readJobEvents(ctx, c, job); err != nil {
		return err
	}
	if _, err := c.StoredMalformed(ctx, job); err != nil {
		return err
	}
	d := bus.MalformedLetter(job, c.Prefix().Jobs(job, schemas.EventScaled), []byte{0xff}, nil,
		errors.New("test"), time.Now())
	return c.PublishDeadLetter(ctx, c.Prefix().Metrics(job, schemas.DeadMetrics), d, "")
}

func TestEachStageUserCanDoItsWorkAndNothingElse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	url := authServer(t)
	p := schemas.DefaultPrefix
	const job = "perm"

	// The manager provisions a fresh bus and declares the job.
	manager := connect(t, ctx, url, "manager")
	if err := manager.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatalf("manager provisions: %v", err)
	}
	if _, err := manager.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming}); err != nil {
		t.Fatal(err)
	}
	if _, err := manager.PublishJobEvent(ctx, &schemas.JobEvent{Job: job, Type: schemas.EventScaled, Replicas: 1,
		State: schemas.Ongoing, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// A job event no reader can decode: the manager's recovery sets it
	// aside once; the actuator and the visualizer find its letter.
	garbled := nats.NewMsg(p.Jobs(job, schemas.EventScaled))
	garbled.Data = []byte{0xff, '{'}
	if _, err := manager.JetStream().PublishMsg(ctx, garbled); err != nil {
		t.Fatal(err)
	}
	if err := readJobEvents(ctx, manager, job); err != nil {
		t.Fatalf("manager reads job events: %v", err)
	}
	if letters, err := manager.StoredMalformed(ctx, job); err != nil || len(letters) != 1 {
		t.Fatalf("the garbled job event has %d dead letters (%v), want 1", len(letters), err)
	}
	checkAllowedSubscriptions(t, url, "manager", p.Submit(), p.Control("stop"))
	now := time.Now()
	// Bytes no stage can read: the controller and the gate set aside such a
	// message among those they consume.
	garbage := []byte{0xff, 0xfe, '{'}

	steps := []struct {
		user       string
		work       func(ctx context.Context, c *bus.Client) error
		pub, sub   []string // denied
		subAllowed []string
	}{{
		user: "client",
		work: func(ctx context.Context, c *bus.Client) error {
			if err := c.PushItems(ctx, job, bus.Items("a", "b")); err != nil {
				return err
			}
			_, err := c.Status(ctx, job)
			return err
		},
		pub: []string{p.Results(job, "x"), p.Decisions(job), "$KV.pace_jobs." + job, "$JS.API.STREAM.DELETE.PACE_WORK"},
		sub: []string{p.Submit(), p.Work(job)},
	}, {
		user: "worker",
		work: func(ctx context.Context, c *bus.Client) error {
			w, err := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
				return strings.ToUpper(it.Payload), nil
			})
			if err != nil {
				return err
			}
			wctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(wctx) }()
			bustest.Eventually(t, 20*time.Second, "the worker's two results", func() bool { return w.Stats().Processed == 2 })
			stop()
			return <-done
		},
		pub: []string{p.Decisions(job), p.KubeRequests(), p.Work(job), "$KV.pace_jobs." + job,
			"$JS.API.STREAM.PURGE.PACE_RESULTS", "$JS.API.CONSUMER.CREATE.PACE_DECISIONS.x"},
		sub: []string{p.Submit(), p.Results(job, "*")},
	}, {
		user: "collector",
		work: func(ctx context.Context, c *bus.Client) error {
			if _, err := c.JetStream().CreateOrUpdateConsumer(ctx, "PACE_RESULTS", jetstream.ConsumerConfig{
				Durable: "count-" + job, FilterSubject: p.JobResults(job), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				return err
			}
			if _, err := c.JetStream().Consumer(ctx, "PACE_WORK", "work-"+job); err != nil {
				return err
			}
			if _, err := c.Jobs(ctx); err != nil {
				return err
			}
			return publish(ctx, c, p.Metrics(job, schemas.RawMetrics), &schemas.Sample{Job: job, At: now, Total: 2})
		},
		pub:        []string{p.Metrics(job, schemas.ProgressMetrics), p.Decisions(job), p.Results(job, "x")},
		sub:        []string{p.Decisions(job)},
		subAllowed: []string{p.Work("*"), p.Results("*", "*"), p.Dead("*"), p.Jobs("*", "*")},
	}, {
		user: "processor",
		work: func(ctx context.Context, c *bus.Client) error {
			if err := fetchOne(ctx, c, "PACE_METRICS", jetstream.ConsumerConfig{Durable: "processor",
				FilterSubject: p.Metrics("*", schemas.RawMetrics)}); err != nil {
				return err
			}
			if err := publish(ctx, c, p.Metrics(job, schemas.ProgressMetrics), &schemas.Progress{Job: job, At: now, Total: 2, Done: 2}); err != nil {
				return err
			}
			// Progress the controller cannot read, after the valid one.
			_, err := c.JetStream().Publish(ctx, p.Metrics(job, schemas.ProgressMetrics), garbage)
			return err
		},
		pub: []string{p.Metrics(job, schemas.RawMetrics), p.KubeRequests(), p.Decisions(job)},
	}, {
		user: "sink",
		work: func(ctx context.Context, c *bus.Client) error {
			return fetchOne(ctx, c, "PACE_METRICS", jetstream.ConsumerConfig{Durable: "sink-test",
				FilterSubject: p.Metrics("*", schemas.ProgressMetrics)})
		},
		pub:        []string{p.KubeRequests(), p.Metrics(job, schemas.ProgressMetrics), p.Jobs(job, schemas.EventScaled)},
		subAllowed: []string{p.Jobs("*", schemas.EventDeleted)},
	}, {
		user: "controller",
		work: func(ctx context.Context, c *bus.Client) error {
			kv, err := c.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "pace_controller",
				Storage: jetstream.FileStorage})
			if err != nil {
				return err
			}
			if _, err := kv.Put(ctx, job, []byte("{}")); err != nil {
				return err
			}
			progress := jetstream.ConsumerConfig{Durable: "controller", FilterSubject: p.Metrics("*", schemas.ProgressMetrics)}
			if err := fetchOne(ctx, c, "PACE_METRICS", progress); err != nil {
				return err
			}
			if err := setAside(ctx, c, manager, "controller", "PACE_METRICS", progress); err != nil {
				return err
			}
			return publish(ctx, c, p.Decisions(job), &schemas.Decision{Job: job, At: now, Replicas: 2, Reason: "test"})
		},
		pub: []string{p.KubeRequests(), p.Metrics(job, schemas.RawMetrics), "$KV.pace_jobs." + job},
	}, {
		user: "actuator",
		work: func(ctx context.Context, c *bus.Client) error {
			if err := fetchOne(ctx, c, "PACE_DECISIONS", jetstream.ConsumerConfig{Durable: "pace-actuator",
				FilterSubject: p.Decisions("*")}); err != nil {
				return err
			}
			if _, err := c.UpdateJob(ctx, job, func(r *schemas.JobRecord) (*schemas.JobRecord, error) {
				r.Replicas = 2
				return r, nil
			}); err != nil {
				return err
			}
			if err := setAsideJobEvent(ctx, c, job); err != nil {
				return err
			}
			if err := publish(ctx, c, p.KubeRequests(), &schemas.KubeRequest{ID: "r1", Job: job, User: "pace-actuator",
				Verb: "patch", APIGroup: "batch", Resource: "jobs", Subresource: "scale", Namespace: "default",
				Name: job, Replicas: 2, At: now}); err != nil {
				return err
			}
			// A request the gate cannot read, after the valid one.
			_, err := c.JetStream().Publish(ctx, p.KubeRequests(), garbage)
			return err
		},
		pub: []string{p.Decisions(job), p.KubeOutcomes(), p.Admission("l", "s")},
	}, {
		user: "gate",
		work: func(ctx context.Context, c *bus.Client) error {
			kv, err := c.JetStream().KeyValue(ctx, "pace_flowcontrol")
			if err != nil {
				return err
			}
			if _, err := kv.Put(ctx, "prioritylevel.test", []byte("{}")); err != nil {
				return err
			}
			if err := fetchOne(ctx, c, "PACE_K8S", jetstream.ConsumerConfig{Durable: "gate"}); err != nil {
				return err
			}
			if err := setAside(ctx, c, manager, "gate", "PACE_K8S", jetstream.ConsumerConfig{Durable: "gate"}); err != nil {
				return err
			}
			// The executor records what it applied: a scaled event and the record's replicas.
			if _, err := c.PublishJobEvent(ctx, &schemas.JobEvent{Job: job, Type: schemas.EventScaled, Replicas: 2,
				State: schemas.Ongoing, At: now}); err != nil {
				return err
			}
			if _, err := c.UpdateJob(ctx, job, func(r *schemas.JobRecord) (*schemas.JobRecord, error) {
				r.Replicas = 2
				return r, nil
			}); err != nil {
				return err
			}
			return publish(ctx, c, p.KubeOutcomes(), &schemas.KubeOutcome{RequestID: "r1", Job: job,
				Status: schemas.Applied, Replicas: 2, At: now})
		},
		pub: []string{p.KubeRequests(), p.Decisions(job), p.Jobs(job, schemas.EventCompleted)},
	}, {
		user: "visualizer",
		work: func(ctx context.Context, c *bus.Client) error {
			if err := setAsideJobEvent(ctx, c, job); err != nil {
				return err
			}
			_, err := c.Status(ctx, job)
			return err
		},
		pub: []string{p.Jobs(job, schemas.EventCreated), "$KV.pace_jobs." + job, p.Submit()},
	}}
	for _, st := range steps {
		t.Run(st.user, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			c := connect(t, ctx, url, st.user)
			// Every process provisions at start: on a provisioned bus
			// that must need no more than reading.
			if st.user != "worker" && st.user != "client" {
				if err := c.Provision(ctx, bus.Limits{}); err != nil {
					t.Fatalf("provision as pace-%s: %v", st.user, err)
				}
			}
			if err := st.work(ctx, c); err != nil {
				t.Fatalf("pace-%s doing its work: %v", st.user, err)
			}
			checkDenied(t, url, st.user, st.pub, st.sub)
			checkAllowedSubscriptions(t, url, st.user, append(st.subAllowed, "_INBOX.test")...)
		})
	}
}

// TestFlowControlDumpIsAnsweredToTheVisualizerOnly runs the flow-control
// request/reply as the stages do: the gate's leader and a manager answer,
// as pace-gate and pace-manager, the visualizer's request, as
// pace-visualizer. APF's state is admin data: no other user may ask for it
// or listen to the requests.
func TestFlowControlDumpIsAnsweredToTheVisualizerOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // outlasts bustest.Eventually's bound
	defer cancel()
	url := authServer(t)
	subject := schemas.DefaultPrefix.FlowControlDump()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	for _, stage := range []string{"gate", "manager"} {
		g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), policy.Defaults(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := connect(t, ctx, url, stage)
		bustest.Run(t, func(ctx context.Context) error { return visualizer.ServeFlowControl(ctx, c, stage, stage+"-0", g, log) })
	}

	vis := connect(t, ctx, url, "visualizer")
	var v *visualizer.FlowControlView
	bustest.Eventually(t, 20*time.Second, "the gate's and the manager's answers", func() bool {
		var err error
		if v, err = visualizer.GatherFlowControl(ctx, vis, time.Second, log); err != nil {
			t.Fatalf("pace-visualizer asking %s: %v", subject, err)
		}
		return len(v.Processes) == 2
	})
	if v.Processes[0].Stage != "gate" || v.Processes[1].Stage != "manager" || len(v.Missing) != 0 {
		t.Errorf("answers %+v, want the gate's and the manager's", v)
	}

	checkAllowedSubscriptions(t, url, "gate", subject)
	checkAllowedSubscriptions(t, url, "manager", subject)
	checkDenied(t, url, "visualizer", nil, []string{subject})
	for _, u := range []string{"gate", "manager"} {
		checkDenied(t, url, u, []string{subject}, nil)
	}
	for _, u := range []string{"collector", "processor", "sink", "controller", "actuator", "worker", "client"} {
		checkDenied(t, url, u, []string{subject}, []string{subject})
	}
}

// TestDeadLetteringUsersKeepLargeBodies has every user that dead-letters
// keep a malformed message too large for its letter, as its stage does:
// the body in the dead-letter object store, then the letter naming it,
// twice with one key (a retry: the second object is deleted, chunks and
// all). pace-admin, as `pace dead-letters` connects, reads each body and
// redrives each letter, which deletes its object. pace-client may neither
// write letters nor touch the object store; an SDK reader meeting an
// undecodable job event goes on without keeping it.
func TestDeadLetteringUsersKeepLargeBodies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	url := authServer(t)
	p := schemas.DefaultPrefix
	const job = "bulky"
	admin := connect(t, ctx, url, "admin")
	if err := admin.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 900<<10) // fits max_payload; in base64 it would not
	for i := range body {
		body[i] = byte(i*7) | 0x80
	}
	origin := p.Metrics(job, schemas.RawMetrics)
	writers := map[string][]string{
		"manager": {p.Dead(job), p.Metrics(job, schemas.DeadMetrics)}, "worker": {p.Dead(job)},
		"collector": {p.Metrics(job, schemas.DeadMetrics)}, "processor": {p.Metrics(job, schemas.DeadMetrics)},
		"sink": {p.Metrics(job, schemas.DeadMetrics)}, "actuator": {p.Metrics(job, schemas.DeadMetrics)},
		"visualizer": {p.Metrics(job, schemas.DeadMetrics)}, "controller": {p.Metrics(job, schemas.DeadMetrics)},
		"gate": {p.Metrics(job, schemas.DeadMetrics)},
	}
	kept := 0
	for user, subjects := range writers {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c := connect(t, ctx, url, user)
		for _, subject := range subjects {
			d := bus.MalformedLetter(job, origin, body, nats.Header{"X-User": {user}}, errors.New("test"), time.Now())
			for range 2 {
				if err := c.PublishDeadLetter(ctx, subject, d, user+"/"+subject); err != nil {
					t.Errorf("pace-%s keeping a large body on %s: %v", user, subject, err)
				}
			}
			kept++
		}
	}

	obs, err := admin.JetStream().ObjectStore(ctx, "pace_dead_letters")
	if err != nil {
		t.Fatal(err)
	}
	if objects, err := obs.List(ctx); err != nil || len(objects) != kept {
		t.Errorf("%d objects (%v), want %d: one per letter", len(objects), err, kept)
	}
	st, err := obs.Status(ctx)
	if limit := uint64(kept*len(body) + len(body)/2); err != nil || st.Size() >= limit {
		t.Fatalf("object store holds %d bytes (%v), want under %d: the duplicates' chunks purged", st.Size(), err, limit)
	}
	var letters []*bus.StoredLetter
	for _, store := range []bus.LetterStore{bus.DeadItems, bus.DeadMessages} {
		for l, err := range admin.Letters(ctx, store, job, false) {
			if err != nil {
				t.Fatal(err)
			}
			letters = append(letters, l)
		}
	}
	if len(letters) != kept {
		t.Errorf("%d letters, want %d", len(letters), kept)
	}
	for _, l := range letters {
		if got, err := admin.LetterBody(ctx, l.DeadLetter); err != nil || !bytes.Equal(got, body) {
			t.Errorf("body of %s's letter: %d bytes (%v), want %d", l.Header["X-User"], len(got), err, len(body))
		}
		if err := admin.Redrive(ctx, l); err != nil {
			t.Errorf("redrive %s's letter: %v", l.Header["X-User"], err)
		}
	}
	if objects, err := obs.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Errorf("after the redrives: %d objects (%v), want none", len(objects), err)
	}

	// pace-client reads job events past an undecodable one, and keeps no letter.
	garbled := nats.NewMsg(p.Jobs(job, schemas.EventScaled))
	garbled.Data = []byte{0xff, '{'}
	if _, err := admin.JetStream().PublishMsg(ctx, garbled); err != nil {
		t.Fatal(err)
	}
	logged := &deadLetterErrs{}
	client, err := bus.Connect(ctx, url, bus.WithLogger(slog.New(logged)), bus.WithUserPassword("pace-client", password("client")))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close(ctx) }()
	if err := readJobEvents(ctx, client, job); err != nil {
		t.Errorf("pace-client reads job events: %v", err)
	}
	if letters, err := admin.StoredMalformed(ctx, job); err != nil || len(letters) != 0 {
		t.Errorf("letters after pace-client's read: %d (%v), want none", len(letters), err)
	}
	// It gave up on the refusal, not after waiting for its timeout.
	if errs := logged.all(); len(errs) != 1 || !errors.Is(errs[0], nats.ErrPermissionViolation) {
		t.Errorf("pace-client's set-aside errors = %v, want one permission violation", errs)
	}
	checkDenied(t, url, "client", []string{p.Metrics(job, schemas.DeadMetrics), "$O.pace_dead_letters.C.x",
		"$O.pace_dead_letters.M.x", "$JS.API.DIRECT.GET.OBJ_pace_dead_letters.x",
		"$JS.API.CONSUMER.CREATE.OBJ_pace_dead_letters", "$JS.API.STREAM.PURGE.OBJ_pace_dead_letters"}, nil)
}

// deadLetterErrs is a slog handler keeping the dead_letter_err attributes
// of the records logged.
type deadLetterErrs struct {
	mu   sync.Mutex
	errs []error
}

func (h *deadLetterErrs) Enabled(context.Context, slog.Level) bool { return true }
func (h *deadLetterErrs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *deadLetterErrs) WithGroup(string) slog.Handler            { return h }

func (h *deadLetterErrs) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "dead_letter_err" {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *deadLetterErrs) all() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.errs)
}
