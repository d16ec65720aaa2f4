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
	for l, err := range reader.Letters().List(ctx, bus.DeadMessages, "*", false) {
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
	for _, err := range c.Jobs().Events(ctx, job, false) {
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
	if _, err := c.Letters().StoredMalformed(ctx, job); err != nil {
		return err
	}
	d := bus.MalformedLetter(job, c.Prefix().Jobs(job, schemas.EventScaled), []byte{0xff}, nil,
		errors.New("test"), time.Now())
	return c.Letters().Publish(ctx, c.Prefix().Metrics(job, schemas.DeadMetrics), d, "")
}

// TestEachStageUserCanDoItsWorkAndNothingElse has each stage user of
// auth.conf, and the tenant owning a job and that job's worker, who log in
// by token through the callout, do their work on the bus, and checks that
// the server refuses them the rest.
func TestEachStageUserCanDoItsWorkAndNothingElse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b := authServer(t)
	url := b.url
	p := schemas.DefaultPrefix
	const job = "perm"

	// The manager provisions a fresh bus, where each user's jobs have a
	// work stream of their own (as every stage logging in as a user of
	// auth.conf provisions it), and declares alice's job.
	limits := bus.Limits{QueuedBytesPerUser: 1 << 20}
	manager := connect(t, ctx, url, "manager")
	if err := manager.Provision(ctx, limits); err != nil {
		t.Fatalf("manager provisions: %v", err)
	}
	if _, err := manager.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	b.callout(t)
	if _, err := manager.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: job, Type: schemas.EventScaled, Replicas: 1,
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
	if letters, err := manager.Letters().StoredMalformed(ctx, job); err != nil || len(letters) != 1 {
		t.Fatalf("the garbled job event has %d dead letters (%v), want 1", len(letters), err)
	}
	checkAllowedSubscriptions(t, url, stage("manager"), p.Submit(), p.Control("stop"))
	now := time.Now()
	// Bytes no stage can read: the controller and the gate set aside such a
	// message among those they consume.
	garbage := []byte{0xff, 0xfe, '{'}

	steps := []struct {
		who        login
		work       func(ctx context.Context, c *bus.Client) error
		pub, sub   []string // denied
		subAllowed []string
	}{{
		who: tokenLogin("alice (the job's owner)", aliceToken),
		work: func(ctx context.Context, c *bus.Client) error {
			if err := c.PushItems(ctx, job, bus.Items("a", "b")); err != nil {
				return err
			}
			_, err := c.Jobs().Status(ctx, job)
			return err
		},
		pub: []string{p.Results("other", "x"), p.Work("other"), p.Decisions(job), "$KV.pace_jobs." + job,
			"$JS.API.STREAM.DELETE.PACE_WORK", p.Metrics(job, schemas.DeadMetrics)},
		sub: []string{p.Submit(), p.Work(job), "_INBOX.test"},
	}, {
		who: tokenLogin("the job's worker", b.jobs.Mint(job)),
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
			"$JS.API.STREAM.PURGE.PACE_RESULTS", "$JS.API.CONSUMER.CREATE.PACE_DECISIONS.x", p.Results("other", "x"),
			p.Submit()},
		sub: []string{p.Submit(), p.Results(job, "*"), "_INBOX.test"},
	}, {
		who: stage("collector"),
		work: func(ctx context.Context, c *bus.Client) error {
			if _, err := c.JetStream().CreateOrUpdateConsumer(ctx, "PACE_RESULTS", jetstream.ConsumerConfig{
				Durable: "count-" + job, FilterSubject: p.JobResults(job), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				return err
			}
			work, err := c.WorkStream(ctx, "alice")
			if err != nil {
				return err
			}
			if _, err := c.JetStream().Consumer(ctx, work, "work-"+job); err != nil {
				return err
			}
			if _, err := c.Jobs().List(ctx); err != nil {
				return err
			}
			return publish(ctx, c, p.Metrics(job, schemas.RawMetrics), &schemas.Sample{Job: job, At: now, Total: 2})
		},
		pub:        []string{p.Metrics(job, schemas.ProgressMetrics), p.Decisions(job), p.Results(job, "x")},
		sub:        []string{p.Decisions(job)},
		subAllowed: []string{p.Work("*"), p.Results("*", "*"), p.Dead("*"), p.Jobs("*", "*")},
	}, {
		who: stage("processor"),
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
		who: stage("sink"),
		work: func(ctx context.Context, c *bus.Client) error {
			return fetchOne(ctx, c, "PACE_METRICS", jetstream.ConsumerConfig{Durable: "sink-test",
				FilterSubject: p.Metrics("*", schemas.ProgressMetrics)})
		},
		pub:        []string{p.KubeRequests(), p.Metrics(job, schemas.ProgressMetrics), p.Jobs(job, schemas.EventScaled)},
		subAllowed: []string{p.Jobs("*", schemas.EventDeleted)},
	}, {
		who: stage("controller"),
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
		who: stage("actuator"),
		work: func(ctx context.Context, c *bus.Client) error {
			if err := fetchOne(ctx, c, "PACE_DECISIONS", jetstream.ConsumerConfig{Durable: "pace-actuator",
				FilterSubject: p.Decisions("*")}); err != nil {
				return err
			}
			if _, err := c.Jobs().Update(ctx, job, func(r *schemas.JobRecord) (*schemas.JobRecord, error) {
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
		who: stage("gate"),
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
			if _, err := c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: job, Type: schemas.EventScaled, Replicas: 2,
				State: schemas.Ongoing, At: now}); err != nil {
				return err
			}
			if _, err := c.Jobs().Update(ctx, job, func(r *schemas.JobRecord) (*schemas.JobRecord, error) {
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
		who: stage("visualizer"),
		work: func(ctx context.Context, c *bus.Client) error {
			if err := setAsideJobEvent(ctx, c, job); err != nil {
				return err
			}
			_, err := c.Jobs().Status(ctx, job)
			return err
		},
		pub: []string{p.Jobs(job, schemas.EventCreated), "$KV.pace_jobs." + job, p.Submit()},
	}}
	for _, st := range steps {
		t.Run(st.who.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			c := connectAs(t, ctx, url, st.who)
			// Every stage provisions at start: on a provisioned bus that
			// must need no more than reading.
			if st.who.token == "" {
				if err := c.Provision(ctx, limits); err != nil {
					t.Fatalf("provision as %s: %v", st.who.name, err)
				}
			}
			if err := st.work(ctx, c); err != nil {
				t.Fatalf("%s doing its work: %v", st.who.name, err)
			}
			checkDenied(t, url, st.who, st.pub, st.sub)
			checkAllowedSubscriptions(t, url, st.who, append(st.subAllowed, st.who.inbox())...)
		})
	}
}

// TestFlowControlDumpIsAnsweredToTheVisualizerOnly runs the flow-control
// request/reply as the stages do: the gate's leader and a manager answer,
// as pace-gate and pace-manager, the visualizer's request, as
// pace-visualizer. APF's state is admin data: no other user may ask for it
// or listen to the requests, nor may a tenant or a worker.
func TestFlowControlDumpIsAnsweredToTheVisualizerOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // outlasts bustest.Eventually's bound
	defer cancel()
	b := authServer(t)
	url := b.url
	const job = "fc"
	manager := connect(t, ctx, url, "manager")
	if err := manager.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := manager.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	b.callout(t)
	subject := schemas.DefaultPrefix.FlowControlDump()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	for _, name := range []string{"gate", "manager"} {
		g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), policy.Defaults(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := connect(t, ctx, url, name)
		bustest.Run(t, func(ctx context.Context) error { return visualizer.ServeFlowControl(ctx, c, name, name+"-0", g, log) })
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

	checkAllowedSubscriptions(t, url, stage("gate"), subject)
	checkAllowedSubscriptions(t, url, stage("manager"), subject)
	checkDenied(t, url, stage("visualizer"), nil, []string{subject})
	for _, u := range []string{"gate", "manager"} {
		checkDenied(t, url, stage(u), []string{subject}, nil)
	}
	for _, l := range []login{stage("collector"), stage("processor"), stage("sink"), stage("controller"), stage("actuator"),
		tokenLogin("alice", aliceToken), tokenLogin("the job's worker", b.jobs.Mint(job))} {
		checkDenied(t, url, l, []string{subject}, []string{subject})
	}
}

// TestDeadLetteringUsersKeepLargeBodies has every user of auth.conf that
// dead-letters keep a malformed message too large for its letter, as its
// stage does: the body in the dead-letter object store, then the letter
// naming it, twice with one key (a retry: the second object is deleted,
// chunks and all). pace-admin, as `pace dead-letters` connects, reads each
// body and redrives each letter, which deletes its object. A tenant, by
// token, may neither keep messages' letters nor touch the object store; an
// SDK reader meeting an undecodable job event goes on without keeping it.
func TestDeadLetteringUsersKeepLargeBodies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b := authServer(t)
	url := b.url
	p := schemas.DefaultPrefix
	const job = "bulky"
	admin := connect(t, ctx, url, "admin")
	if err := admin.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	b.callout(t)
	body := make([]byte, 900<<10) // fits max_payload; in base64 it would not
	for i := range body {
		body[i] = byte(i*7) | 0x80
	}
	origin := p.Metrics(job, schemas.RawMetrics)
	dead := []string{p.Metrics(job, schemas.DeadMetrics)}
	writers := map[string][]string{
		"manager": {p.Dead(job), p.Metrics(job, schemas.DeadMetrics)}, "collector": dead, "processor": dead,
		"sink": dead, "actuator": dead, "visualizer": dead, "controller": dead, "gate": dead,
	}
	kept := 0
	for user, subjects := range writers {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c := connect(t, ctx, url, user)
		for _, subject := range subjects {
			from := origin
			if subject == p.Dead(job) { // a work item's letter, which goes back to its queue only
				from = p.Work(job)
			}
			d := bus.MalformedLetter(job, from, body, nats.Header{"X-User": {user}}, errors.New("test"), time.Now())
			for range 2 {
				if err := c.Letters().Publish(ctx, subject, d, user+"/"+subject); err != nil {
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
		for l, err := range admin.Letters().List(ctx, store, job, false) {
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
		if got, err := admin.Letters().Body(ctx, l.DeadLetter); err != nil || !bytes.Equal(got, body) {
			t.Errorf("body of %s's letter: %d bytes (%v), want %d", l.Header["X-User"], len(got), err, len(body))
		}
		if err := admin.Letters().Redrive(ctx, l); err != nil {
			t.Errorf("redrive %s's letter: %v", l.Header["X-User"], err)
		}
	}
	if objects, err := obs.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Errorf("after the redrives: %d objects (%v), want none", len(objects), err)
	}

	// The job's owner reads job events past an undecodable one, and keeps
	// no letter.
	garbled := nats.NewMsg(p.Jobs(job, schemas.EventScaled))
	garbled.Data = []byte{0xff, '{'}
	if _, err := admin.JetStream().PublishMsg(ctx, garbled); err != nil {
		t.Fatal(err)
	}
	logged := &deadLetterErrs{}
	alice := tokenLogin("alice", aliceToken)
	client, err := bus.Connect(ctx, url, bus.WithLogger(slog.New(logged)), alice.bus())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close(ctx) }()
	if err := readJobEvents(ctx, client, job); err != nil {
		t.Errorf("alice reads job events: %v", err)
	}
	if letters, err := admin.Letters().StoredMalformed(ctx, job); err != nil || len(letters) != 0 {
		t.Errorf("letters after alice's read: %d (%v), want none", len(letters), err)
	}
	// It gave up on the refusal, not after waiting for its timeout.
	if errs := logged.all(); len(errs) != 1 || !errors.Is(errs[0], nats.ErrPermissionViolation) {
		t.Errorf("alice's set-aside errors = %v, want one permission violation", errs)
	}
	checkDenied(t, url, alice, []string{p.Metrics(job, schemas.DeadMetrics), "$O.pace_dead_letters.C.x",
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
