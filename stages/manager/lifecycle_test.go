package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

func TestBatchJobRunsToCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", `{"name":"Upper Case!","deadline":"10m","workload":{"url":"`+e.files.URL+`/five.txt"}}`)
	if !strings.HasPrefix(id, "upper-case-") || strings.Contains(id, ".") {
		t.Errorf("id = %q, want upper-case-<hex> without dots", id)
	}
	v := e.status("alice-token", id)
	if v["app_id"] != id || v["status"] != "ongoing" || v["total"] != 5.0 || v["owner"] != "alice" || v["mode"] != "batch" {
		t.Fatalf("view = %v, want ongoing batch of 5 owned by alice", v)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000000GMT", v["starting_time"].(string)); err != nil {
		t.Errorf("starting_time %v: %v", v["starting_time"], err)
	}

	var order []string
	e.work(id, 1, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		order = append(order, it.Payload) // one worker: no race
		return strings.ToUpper(it.Payload), nil
	})
	e.waitState(id, schemas.Completed)
	// FIFO, blank line skipped, last line kept without a trailing newline.
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(order, want) {
		t.Errorf("processing order = %v, want %v", order, want)
	}
	v = e.status("alice-token", id)
	if v["status"] != "completed" || v["done"] != 5.0 || v["dead"] != 0.0 || v["items_ok"] != 5.0 {
		t.Errorf("view = %v, want completed with 5 results", v)
	}
	for _, k := range []string{"max_error", "min_error", "final_error", "final_replicas", "execution_time", "scaling_strategy", "heuristic_options", "deadline_met"} {
		if _, ok := v[k]; !ok {
			t.Errorf("finished job view lacks summary field %s", k)
		}
	}
	var types []schemas.JobEventType
	for ev, err := range e.c.Jobs().Watch(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	if want := []schemas.JobEventType{schemas.EventCreated, schemas.EventStarted, schemas.EventCompleted}; !slices.Equal(types, want) {
		t.Errorf("events = %v, want %v", types, want)
	}
	// Lifetime 0: cleaned at the next check, then deletable.
	e.m.Reconcile(context.Background())
	if rec, _ := e.c.Jobs().Status(context.Background(), id); rec.CleanedAt.IsZero() {
		t.Errorf("resources not cleaned after lifetime 0")
	}
	if r := e.do("DELETE", "/submissions/"+id, "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/submissions/"+id, "alice-token", ""); r.code != http.StatusNotFound {
		t.Errorf("after delete GET = %d, want 404", r.code)
	}
}

func TestFailingItemsFailTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", `{"deadline":"1m","max_deliveries":2,"workload":{"items":["ok","bad","ok2"]}}`)
	e.work(id, 2, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		if it.Payload == "bad" {
			return "", fmt.Errorf("cannot process %q", it.Payload)
		}
		return it.Payload, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.c.Letters().Move(ctx) }()
	e.waitState(id, schemas.Failed)
	r := e.do("GET", "/submissions/"+id+"/errors", "alice-token", "")
	if r.code != http.StatusOK || !strings.Contains(string(r.body), `cannot process \"bad\"`) {
		t.Errorf("errors = %d %s, want the dead letter with its last error", r.code, r.body)
	}
}

func TestStopAndTerminate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	items := make([]string, 50)
	for i := range items {
		items[i] = fmt.Sprintf(`"i%d"`, i)
	}
	doc := `{"deadline":"1h","workload":{"items":[` + strings.Join(items, ",") + `]}}`

	// Stop: one item is in flight when the stop arrives; it finishes and
	// has a result, the other 49 are dropped; the job ends stopped.
	stopped := e.submit("alice-token", doc)
	started, release := make(chan string, 1), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	e.work(stopped, 1, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		select {
		case started <- it.Payload:
		default:
		}
		<-release
		return "done", nil
	})
	t.Cleanup(unblock) // registered after e.work's cleanup, so it runs first
	first := <-started
	if r := e.do("PUT", "/submissions/"+stopped+"/stop", "alice-token", `{"enable_auth": false}`); r.code != http.StatusNoContent {
		t.Fatalf("stop = %d %s", r.code, r.body)
	}
	if err := e.c.PushItems(ctx, stopped, bus.Items("late")); err == nil {
		t.Errorf("push after stop accepted, want refused")
	}
	e.m.Reconcile(ctx)
	if rec, _ := e.c.Jobs().Status(ctx, stopped); rec.State != schemas.Ongoing || !rec.StopRequested {
		t.Fatalf("while an item is in flight: state %s stop_requested %t, want ongoing and true", rec.State, rec.StopRequested)
	}
	unblock()
	e.waitState(stopped, schemas.Stopped)
	res, err := e.c.Outputs().StoredResults(ctx, stopped)
	if err != nil || len(res) != 1 || res[0].ItemID != "000001" {
		t.Errorf("results after stop = %v (%v), want only the in-flight item %s", res, err, first)
	}
	if r := e.do("PUT", "/submissions/"+stopped+"/stop", "alice-token", ""); r.code != http.StatusConflict {
		t.Errorf("second stop = %d, want 409", r.code)
	}

	// Terminate: ends at once, even with an item in flight; the queue is released.
	term := e.submit("alice-token", doc)
	if r := e.do("DELETE", "/submissions/"+term, "alice-token", ""); r.code != http.StatusConflict {
		t.Errorf("delete of a running job = %d %s, want 409", r.code, r.body)
	}
	if r := e.do("PUT", "/submissions/"+term+"/terminate", "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatalf("terminate = %d %s", r.code, r.body)
	}
	rec, _ := e.c.Jobs().Status(ctx, term)
	if rec.State != schemas.Terminated {
		t.Errorf("state after terminate = %s, want terminated at once", rec.State)
	}
	ws, _ := e.c.JobWork(ctx, rec)
	if ws.Pending != 0 || ws.InFlight != 0 {
		t.Errorf("work after terminate = %+v, want none", ws)
	}
	if r := e.do("DELETE", "/submissions/"+term, "alice-token", ""); r.code != http.StatusNoContent {
		t.Errorf("delete of a terminated job = %d %s, want 204", r.code, r.body)
	}
}

func TestStreamingJobFedByPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit("bob-token", `{"name":"ingest","mode":"streaming"}`)
	if err := e.c.PushItems(ctx, id, bus.Items("x", "y", "z")); err != nil {
		t.Fatal(err)
	}
	e.work(id, 2, upper)
	rec, err := e.c.Jobs().Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, "3 results", func() bool {
		ws, _ := e.c.JobWork(ctx, rec)
		return ws.Results == 3
	})
	// Items keep coming: a streaming job's view has no total, only counts.
	if v := e.status("bob-token", id); v["done"] != 3.0 || v["total"] != nil {
		t.Errorf("view done = %v, total = %v; want 3 done and no total", v["done"], v["total"])
	}
	e.m.Reconcile(ctx)
	if rec, _ := e.c.Jobs().Status(ctx, id); rec.State != schemas.Ongoing {
		t.Fatalf("streaming job %s before stop, want ongoing", rec.State)
	}
	if err := e.c.Jobs().Stop(ctx, id, bus.WithToken("bob-token")); err != nil { // over NATS
		t.Fatal(err)
	}
	e.waitState(id, schemas.Stopped)
}

func TestOwnersSeeOnlyTheirJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", `{"deadline":"1m","workload":{"items":["a"]}}`)
	tests := []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/submissions/" + id, "bob-token", http.StatusNotFound},
		{"PUT", "/submissions/" + id + "/stop", "bob-token", http.StatusNotFound},
		{"PUT", "/submissions/" + id + "/terminate", "bob-token", http.StatusNotFound},
		{"GET", "/submissions/" + id + "/report", "bob-token", http.StatusNotFound},
		{"PUT", "/submissions/" + id + "/stop", "", http.StatusUnauthorized},
		{"GET", "/submissions/" + id, "root-token", http.StatusOK},
		{"GET", "/submissions/" + id, "alice-token", http.StatusOK},
		{"GET", "/submissions/cluster", "alice-token", http.StatusForbidden},
		{"POST", "/plugins", "alice-token", http.StatusForbidden},
	}
	for _, tt := range tests {
		if r := e.do(tt.method, tt.path, tt.token, ""); r.code != tt.want {
			t.Errorf("%s %s as %q = %d %s, want %d", tt.method, tt.path, tt.token, r.code, r.body, tt.want)
		}
	}
	var bobs map[string]any
	e.do("GET", "/submissions", "bob-token", "").json(t, &bobs)
	if len(bobs) != 0 {
		t.Errorf("bob lists %v, want none of alice's jobs", bobs)
	}
	var roots map[string]any
	e.do("GET", "/submissions", "root-token", "").json(t, &roots)
	if _, ok := roots[id]; !ok {
		t.Errorf("admin list %v lacks %s", roots, id)
	}
	// Asperathos body credentials stand for the caller: alice's password is her token.
	if r := e.do("PUT", "/submissions/"+id+"/stop", "", `{"enable_auth":true,"username":"alice","password":"alice-token"}`); r.code != http.StatusNoContent {
		t.Errorf("stop with body credentials = %d %s, want 204", r.code, r.body)
	}
}

func TestAsperathosPayloadRunsToCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := asperathos(t, e.files.URL+"/three.txt", nil)
	id := e.submit("alice-token", body)
	if len(id) != len("kj-1234567") || !strings.HasPrefix(id, "kj-") {
		t.Errorf("id = %q, want kj-xxxxxxx", id)
	}
	rec, err := e.c.Jobs().Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	s := rec.Spec
	if s.Replicas != (schemas.Replicas{Min: 1, Max: 10, Initial: 1}) || s.Deadline.After.D() != time.Second ||
		s.Controller.Name != "default" || s.Controller.CheckInterval.D() != time.Second ||
		s.ResourcesLifetime.D() != 2*time.Minute || s.Worker.Image == "" || s.Worker.Env["SCONE_CONFIG_ID"] != "asd" ||
		!slices.Equal(s.Worker.ImagePullSecrets, []string{"gitlablsdtoken"}) || rec.Format != "asperathos" {
		t.Errorf("mapped spec = %+v", s)
	}
	e.work(id, 1, upper)
	e.waitState(id, schemas.Completed)
	v := e.status("alice-token", id)
	if v["status"] != "completed" || v["visualizer_url"] != "URL not generated!" {
		t.Errorf("view = %v", v)
	}
	// job_resources_lifetime 120: not cleaned before, cleaned after.
	e.m.Reconcile(context.Background())
	if rec, _ := e.c.Jobs().Status(context.Background(), id); !rec.CleanedAt.IsZero() {
		t.Fatalf("cleaned before its lifetime")
	}
	e.clock.Step(121 * time.Second)
	e.m.Reconcile(context.Background())
	if rec, _ := e.c.Jobs().Status(context.Background(), id); rec.CleanedAt.IsZero() {
		t.Errorf("not cleaned after its lifetime")
	}
}

func TestRestartRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := bustest.ServerAt(t, dir, "127.0.0.1:0")
	e := newEnvAt(t, srv)
	done := e.submit("alice-token", `{"deadline":"1m","workload":{"items":["a","b"]}}`)
	e.work(done, 1, upper)
	e.waitState(done, schemas.Completed)
	running := e.submit("alice-token", `{"deadline":"1h","workload":{"items":["a","b","c"]}}`)
	pending := e.submit("alice-token", `{"deadline":"1m","resources_lifetime":"1h","workload":{"items":["x"]}}`)
	e.work(pending, 1, upper)
	e.waitState(pending, schemas.Completed)
	e.stop()
	srv.Shutdown()

	srv2 := bustest.ServerAt(t, dir, "127.0.0.1:0")
	e2 := newEnvAt(t, srv2)
	e2.clock.SetTime(e.clock.Now())
	var list map[string]map[string]any
	e2.do("GET", "/submissions", "alice-token", "").json(t, &list)
	for id, want := range map[string]string{done: "completed", running: "ongoing", pending: "completed"} {
		if got := list[id]["status"]; got != want {
			t.Errorf("after restart %s is %v, want %s", id, got, want)
		}
	}
	// The running job continues; the pending cleanup resumes.
	e2.work(running, 1, upper)
	e2.waitState(running, schemas.Completed)
	e2.clock.Step(time.Hour)
	e2.m.Reconcile(context.Background())
	if rec, _ := e2.c.Jobs().Status(context.Background(), pending); rec.CleanedAt.IsZero() {
		t.Errorf("pending cleanup did not resume after restart")
	}
}

func TestRecoverReplaysEventsTheRecordMissed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit("alice-token", `{"deadline":"1m","workload":{"items":["a"]}}`)
	// An event stored without its record update (a crash in between).
	if _, err := e.c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: id, Type: schemas.EventTerminated,
		State: schemas.Terminated, At: time.Now(), Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, _ := e.c.Jobs().Status(ctx, id); rec.State != schemas.Terminated {
		t.Errorf("after recover state = %s, want terminated", rec.State)
	}
}

// TestUnreadableRecordIsRebuiltFromEvents corrupts a job's record in KV
// pace_jobs: listing still answers (the others are not hidden), and Recover
// rebuilds the record from the job's events instead of failing the
// manager's start.
func TestUnreadableRecordIsRebuiltFromEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit("alice-token", `{"deadline":"1m","workload":{"items":["a"]}}`)
	other := e.submit("alice-token", `{"deadline":"1m","workload":{"items":["b"]}}`)
	kv, err := e.c.JetStream().KeyValue(ctx, e.c.Prefix().Bucket("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, id, []byte{0xff, '{'}); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/submissions", "alice-token", "")
	var listed map[string]any
	r.json(t, &listed)
	if _, ok := listed[other]; r.code != http.StatusOK || !ok {
		t.Fatalf("GET /submissions = %d %s, want 200 listing %s", r.code, r.body, other)
	}
	if err := e.m.Recover(ctx); err != nil {
		t.Fatalf("recover with an unreadable record: %v", err)
	}
	rec, err := e.c.Jobs().Status(ctx, id)
	if err != nil || rec.ID != id || rec.State == "" || rec.Spec.Workload.Empty() && rec.Total != 1 {
		t.Fatalf("record after recover = %+v, %v; want it rebuilt from its events", rec, err)
	}
}

func TestSubmitOverNATSSharesValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // bounds the watch below
	defer cancel()
	id, err := e.c.Jobs().Submit(ctx, []byte("mode: batch\ndeadline: 1m\nworkload: {items: [a, b]}\n"),
		bus.WithToken("bob-token"), bus.WithContentType("application/yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := e.c.Jobs().Status(ctx, id); err != nil || rec.Spec.Owner != "bob" || rec.Total != 2 {
		t.Fatalf("record = %+v, %v; want bob's job of 2 items", rec, err)
	}
	_, err = e.c.Jobs().Submit(ctx, []byte(`{"mode":"batch","replicas":{"min":-1}}`), bus.WithToken("bob-token"))
	var apiErr *schemas.APIError
	if !asAPIError(err, &apiErr) || apiErr.Code != 400 || len(apiErr.Details) < 3 {
		t.Fatalf("bad submission over NATS = %v, want 400 with every field", err)
	}
	e.work(id, 1, upper)
	var last *schemas.JobEvent
	reconciled := make(chan struct{})
	defer func() { <-reconciled }() // not past the test, whose cleanup closes the client
	go func() {
		defer close(reconciled)
		for ctx.Err() == nil { // until the job ends, however slow the machine
			e.m.Reconcile(ctx)
			if rec, err := e.c.Jobs().Status(ctx, id); err != nil || rec.State.Final() {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	for ev, err := range e.c.Jobs().Watch(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if last == nil || last.State != schemas.Completed {
		t.Errorf("watch ended with %+v, want completed", last)
	}
	if err := e.c.Jobs().Terminate(ctx, id, bus.WithToken("alice-token")); err == nil {
		t.Errorf("alice terminated bob's job over NATS")
	}
}

func TestInterruptedCreationEndsInError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	spec := schemas.JobSpec{Mode: schemas.Batch, Owner: "alice", Deadline: schemas.Deadline{After: schemas.Duration(time.Minute)},
		Workload: schemas.Workload{URL: "http://example.com/w"}}.WithDefaults()
	// A manager stored the created event and died before queueing the items,
	// longer ago than a request may take.
	if _, err := e.c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: "job-dead123", Type: schemas.EventCreated,
		State: schemas.Created, Spec: &spec, At: e.clock.Now().Add(-2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitState("job-dead123", schemas.Error)
	if v := e.status("alice-token", "job-dead123"); !strings.Contains(v["reason"].(string), "interrupted") {
		t.Errorf("reason = %v", v["reason"])
	}
}

func TestCreationByAnotherReplicaIsLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	spec := schemas.JobSpec{Mode: schemas.Batch, Owner: "alice", Deadline: schemas.Deadline{After: schemas.Duration(time.Minute)},
		Workload: schemas.Workload{URL: "http://example.com/w"}}.WithDefaults()
	// Another manager replica has just stored the created event and is queueing the items.
	if _, err := e.c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: "job-other12", Type: schemas.EventCreated,
		State: schemas.Created, Spec: &spec, At: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	e.m.Reconcile(ctx)
	if rec, err := e.c.Jobs().Status(ctx, "job-other12"); err != nil || rec.State != schemas.Created {
		t.Fatalf("job being created elsewhere: %v %v, want still created", rec, err)
	}
}

func TestDeleteAllKeepsRunningJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	done := e.submit("alice-token", `{"deadline":"1m","workload":{"items":["a"]}}`)
	e.work(done, 1, upper)
	e.waitState(done, schemas.Completed)
	running := e.submit("alice-token", `{"mode":"streaming"}`)
	r := e.do("DELETE", "/submissions", "alice-token", "")
	if r.code != http.StatusConflict || !strings.Contains(string(r.body), running) {
		t.Errorf("DELETE /submissions = %d %s, want 409 naming %s", r.code, r.body, running)
	}
	if r := e.do("GET", "/submissions/"+done, "alice-token", ""); r.code != http.StatusNotFound {
		t.Errorf("finished job after DELETE /submissions = %d, want 404", r.code)
	}
	if r := e.do("GET", "/submissions/"+running, "alice-token", ""); r.code != http.StatusOK {
		t.Errorf("running job after DELETE /submissions = %d, want 200", r.code)
	}
}

func TestAnonymousCallers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		allow         bool
		submit, probe int
	}{
		{"denied by default", false, http.StatusUnauthorized, http.StatusOK},
		{"allowed by config", true, http.StatusAccepted, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *manager.Config) { c.AllowAnonymous = tt.allow })
			r := e.do("POST", "/submissions", "", `{"mode":"streaming"}`)
			if r.code != tt.submit {
				t.Errorf("anonymous submit = %d %s, want %d", r.code, r.body, tt.submit)
			}
			if r := e.do("GET", "/plugins", "", ""); r.code != tt.probe {
				t.Errorf("anonymous GET /plugins = %d, want %d", r.code, tt.probe)
			}
			if tt.allow {
				var out struct {
					JobID string `json:"job_id"`
				}
				r.json(t, &out)
				if r := e.do("GET", "/submissions/"+out.JobID, "alice-token", ""); r.code != http.StatusNotFound {
					t.Errorf("alice sees the anonymous job: %d", r.code)
				}
				if r := e.do("PUT", "/submissions/"+out.JobID+"/stop", "", ""); r.code != http.StatusNoContent {
					t.Errorf("anonymous stop of its job = %d %s", r.code, r.body)
				}
			}
		})
	}
}

func TestAsperathosBodyCredentialsSubmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := asperathos(t, e.files.URL+"/three.txt", func(d, _ map[string]any) {
		d["enable_auth"], d["username"], d["password"] = true, "alice", "alice-token"
	})
	id := e.submit("", body) // no bearer token: the body's credentials identify alice
	if rec, err := e.c.Jobs().Status(context.Background(), id); err != nil || rec.Spec.Owner != "alice" {
		t.Fatalf("owner = %+v, %v; want alice", rec, err)
	}
	if r := e.do("GET", "/submissions/"+id, "bob-token", ""); r.code != http.StatusNotFound {
		t.Errorf("bob sees alice's job: %d", r.code)
	}
}
