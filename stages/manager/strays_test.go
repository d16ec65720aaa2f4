package manager_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

// carelessClient publishes with nats.go alone, as a program in any
// language does: nothing checks the job's state before the server stores
// an item.
func carelessClient(t *testing.T, e *env) jetstream.JetStream {
	t.Helper()
	_, js := bustest.Raw(t, e.srv.ClientURL())
	return js
}

// stray is an item published straight to pace.work.<job>.
type stray struct {
	job  string
	body []byte
	hdr  nats.Header
}

func (s stray) publish(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	msg := &nats.Msg{Subject: "pace.work." + s.job, Data: s.body, Header: s.hdr}
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatalf("publish to %s: %v", msg.Subject, err)
	}
}

func itemBody(job, id, payload string) []byte {
	b, _ := json.Marshal(schemas.WorkItem{ID: id, Job: job, Payload: payload})
	return b
}

// queued is how many messages the work stream holds for job.
func (e *env) queued(job string) uint64 {
	e.t.Helper()
	q, err := e.c.Queues().QueuedWork(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return q.Subjects["pace.work."+job]
}

// letters is job's dead letters.
func (e *env) letters(job string) []*schemas.DeadLetter {
	e.t.Helper()
	dead, err := e.c.Letters().Stored(context.Background(), job)
	if err != nil {
		e.t.Fatal(err)
	}
	return dead
}

// runBatch submits a batch job and runs one worker until it completes.
func (e *env) runBatch(doc string) string {
	e.t.Helper()
	id := e.submit("alice-token", doc)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.c.Worker(id, upper, bus.WithWorkerID("w-"+id))
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	e.waitState(id, schemas.Completed)
	cancel()
	if err := <-done; err != nil {
		e.t.Fatal(err)
	}
	return id
}

// Items published to a job that does not accept them end up as its dead
// letters, each once, with why, and leave the work stream; items of
// created and ongoing jobs, and of a job created within the grace, stay.
func TestStrayItemsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	js := carelessClient(t, e)

	completed := e.runBatch(`{"deadline":"10m","resources_lifetime":"1h","workload":{"items":["a"]}}`)
	stopped := e.submit("alice-token", `{"mode":"streaming","resources_lifetime":"1h"}`)
	if r := e.do("PUT", "/submissions/"+stopped+"/stop", "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatalf("stop = %d %s", r.code, r.body)
	}
	e.waitState(stopped, schemas.Stopped)
	terminated := e.submit("alice-token", `{"deadline":"10m","resources_lifetime":"1h","workload":{"items":["t1","t2"]}}`)
	if r := e.do("PUT", "/submissions/"+terminated+"/terminate", "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatalf("terminate = %d %s", r.code, r.body)
	}
	deleted := e.submit("alice-token", `{"mode":"streaming"}`)
	if r := e.do("PUT", "/submissions/"+deleted+"/terminate", "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatalf("terminate = %d %s", r.code, r.body)
	}
	if r := e.do("DELETE", "/submissions/"+deleted, "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.code, r.body)
	}
	ongoing := e.submit("alice-token", `{"mode":"streaming"}`)
	spec := schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice"}.WithDefaults()
	if _, err := e.c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: "being-created", Type: schemas.EventCreated,
		State: schemas.Created, Spec: &spec, At: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}

	refused := map[string]stray{ // job → its stray item; why it is refused
		completed:       {completed, itemBody(completed, "late-1", "after the end"), nil},
		stopped:         {stopped, itemBody(stopped, "late-2", "after the stop"), nats.Header{"X-Mine": {"kept"}}},
		terminated:      {terminated, itemBody(terminated, "late-3", "after terminate"), nil},
		deleted:         {deleted, itemBody(deleted, "late-4", "after delete"), nil},
		"never-created": {"never-created", []byte("not an item \xff"), nil},
	}
	why := map[string]string{completed: "job completed", stopped: "job stopped", terminated: "job terminated",
		deleted: "no such job", "never-created": "no such job"}
	kept := []stray{
		{ongoing, itemBody(ongoing, "i1", "ongoing"), nil},
		{"being-created", itemBody("being-created", "i2", "created"), nil},
		{"declared-late", itemBody("declared-late", "i3", "first item, then the job"), nil},
	}
	for _, s := range refused {
		s.publish(t, js)
	}
	for _, s := range kept {
		s.publish(t, js)
	}

	// Finished jobs take no items: theirs are refused at once. Jobs that
	// do not exist get the grace, during which one is declared.
	e.m.SweepStrays(ctx)
	for _, job := range []string{completed, stopped, terminated} {
		if n := e.queued(job); n != 0 {
			t.Errorf("%s: work stream holds %d items after a sweep, want 0", job, n)
		}
	}
	for _, job := range []string{deleted, "never-created"} {
		if n, dead := e.queued(job), e.letters(job); n != 1 || len(dead) != 0 {
			t.Errorf("%s within the grace: %d queued, %d letters, want 1 queued and no letter", job, n, len(dead))
		}
	}
	if _, err := e.c.DeclareJob(ctx, "declared-late", schemas.JobSpec{Mode: schemas.Streaming}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(6 * time.Second) // past the 5s grace; the manager's own sweeps may run too
	e.m.SweepStrays(ctx)
	e.m.SweepStrays(ctx) // again: nothing more is refused

	for job, s := range refused {
		if n := e.queued(job); n != 0 {
			t.Errorf("%s: work stream holds %d items, want 0", job, n)
		}
		dead := e.letters(job)
		if len(dead) != 1 {
			t.Errorf("%s: %d dead letters, want exactly 1: %+v", job, len(dead), dead)
			continue
		}
		d := dead[0]
		if d.Reason != schemas.RefusedItem || !strings.HasPrefix(d.LastError, why[job]) || d.Subject != "pace.work."+job ||
			!bytes.Equal(d.Raw, s.body) || d.Sequence == 0 {
			t.Errorf("%s: letter %+v, want reason refused, last error %q…, subject and body kept", job, d, why[job])
		}
		if s.hdr != nil && d.Header["X-Mine"][0] != "kept" {
			t.Errorf("%s: letter headers %v, want the publisher's kept", job, d.Header)
		}
		var it schemas.WorkItem
		if json.Unmarshal(s.body, &it) == nil && (d.ItemID != it.ID || d.Payload != it.Payload) {
			t.Errorf("%s: letter item %q payload %q, want %q %q", job, d.ItemID, d.Payload, it.ID, it.Payload)
		}
	}
	for _, s := range kept {
		if n, dead := e.queued(s.job), e.letters(s.job); n != 1 || len(dead) != 0 {
			t.Errorf("%s: %d queued, %d letters, want its item queued and no letter", s.job, n, len(dead))
		}
	}

	// The job's errors show the letter; its counts leave it out of dead.
	r := e.do("GET", "/submissions/"+completed+"/errors", "alice-token", "")
	if r.code != http.StatusOK || !strings.Contains(string(r.body), `"reason":"refused"`) ||
		!strings.Contains(string(r.body), "after the end") {
		t.Errorf("errors of %s = %d %s, want its refused item", completed, r.code, r.body)
	}
	if v := e.status("alice-token", completed); v["dead"] != 0.0 || v["refused"] != 1.0 || v["items_dead"] != 0.0 {
		t.Errorf("view of %s: dead %v refused %v items_dead %v, want 0, 1, 0", completed, v["dead"], v["refused"], v["items_dead"])
	}
	// A job that never existed has no record, but its letters are listed
	// under its subject, as pace dead-letters list JOB reads them.
	var listed []*bus.StoredLetter
	for l, err := range e.c.Letters().List(ctx, bus.DeadItems, "never-created", false) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, l)
	}
	if len(listed) != 1 || listed[0].Reason != schemas.RefusedItem {
		t.Fatalf("letters of never-created = %+v, want its refused item", listed)
	}

	// Redriven: refused while its job does not accept items, sent as it
	// was once the job exists.
	stoppedLetter := storedLetter(t, e.c, stopped)
	if err := e.c.Letters().Redrive(ctx, stoppedLetter); !errors.Is(err, bus.ErrJobFinished) {
		t.Errorf("redrive to a stopped job: %v, want ErrJobFinished", err)
	}
	if _, err := e.c.DeclareJob(ctx, "never-created", schemas.JobSpec{Mode: schemas.Streaming}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Letters().Redrive(ctx, listed[0]); err != nil {
		t.Fatal(err)
	}
	st, err := e.c.JetStream().Stream(ctx, "PACE_WORK")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "pace.work.never-created")
	if err != nil || !bytes.Equal(m.Data, []byte("not an item \xff")) {
		t.Errorf("redriven message = %v (%v), want the body as published", m, err)
	}
	if dead := e.letters("never-created"); len(dead) != 0 {
		t.Errorf("letters after redrive = %d, want 0", len(dead))
	}
}

// An item queued to a finished job is refused because the ledger took it
// in and asked for a sweep: the sweep ticks alone, quiet, would not.
// (The job's end asked for one too, so this ask may wait for the tick.)
func TestAStrayItemIsRefusedOnArrival(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	js := carelessClient(t, e)
	done := e.runBatch(`{"deadline":"10m","resources_lifetime":"1h","workload":{"items":["a"]}}`)
	stray{done, itemBody(done, "late", "after the end"), nil}.publish(t, js)
	e.clock.Step(2 * time.Second) // one tick of the default stray sweep
	bustest.Eventually(t, 10*time.Second, "the late item refused", func() bool {
		return e.queued(done) == 0 && len(e.letters(done)) == 1
	})
}

func storedLetter(t *testing.T, c *bus.Client, job string) *bus.StoredLetter {
	t.Helper()
	for l, err := range c.Letters().List(context.Background(), bus.DeadItems, job, false) {
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Fatalf("no letter of %s", job)
	return nil
}

func TestStraySettingsAreValidated(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  manager.Config
		want string
	}{
		{"defaults", manager.Config{}, ""},
		{"negative sweep", manager.Config{StraySweep: -time.Second}, "stray_sweep"},
		{"negative grace", manager.Config{StrayGrace: -time.Second}, "stray_grace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg.Defaults()
			errs := cfg.Validate()
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tt.want != "" && (len(errs) != 1 || errs[0].Field != tt.want):
				t.Errorf("errors %v, want one for %s", errs, tt.want)
			}
			if tt.want == "" && (cfg.StraySweep != 2*time.Second || cfg.StrayGrace != 5*time.Second) {
				t.Errorf("defaults: sweep %s grace %s, want 2s and 5s", cfg.StraySweep, cfg.StrayGrace)
			}
		})
	}
}
