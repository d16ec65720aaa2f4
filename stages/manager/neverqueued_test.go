package manager_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestResultsForItemsNeverQueuedCountForNothing plays a job's own careless
// or hostile principal with nats.go alone: results for ids that are not in
// a 5-item batch job's workload (fake1…fake5, and 000006 past its end)
// neither complete the job nor count as done; they are moved to its dead
// letters with reason never_queued and leave the results stream. Its real
// items then run to completion as usual.
func TestResultsForItemsNeverQueuedCountForNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	js := carelessClient(t, e)
	id := e.submit("alice-token", `{"deadline":"10m","workload":{"items":["a","b","c","d","e"]}}`)

	forged := []string{"fake1", "fake2", "fake3", "fake4", "fake5", "000006"}
	forgeResults(t, e, js, id, forged)

	bustest.Eventually(t, 20*time.Second, "forged results set aside", func() bool {
		e.m.Reconcile(ctx)
		return e.results(id) == 0
	})
	if rec, err := e.c.Jobs().Status(ctx, id); err != nil || rec.State != schemas.Ongoing {
		t.Fatalf("job %s after %d forged results: %v (%v), want ongoing", id, len(forged), rec.State, err)
	}
	letters, err := e.c.Letters().Stored(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, l := range letters {
		if l.Reason != schemas.NeverQueued || !strings.Contains(l.LastError, "has no item") || string(l.Raw) == "" {
			t.Errorf("letter %+v, want reason never_queued naming the item, the result kept", l)
		}
		got[l.ItemID] = true
	}
	for _, item := range forged {
		if !got[item] {
			t.Errorf("no never_queued letter for %s (letters %v)", item, got)
		}
	}
	v := e.status("alice-token", id)
	if v["done"] != 0.0 || v["dead"] != 0.0 {
		t.Errorf("view after the forged results: done %v, dead %v; want 0 and 0", v["done"], v["dead"])
	}

	e.work(id, 2, upper)
	e.waitState(id, schemas.Completed)
	if v := e.status("alice-token", id); v["done"] != 5.0 || v["dead"] != 0.0 {
		t.Errorf("view when completed: done %v, dead %v; want 5 and 0", v["done"], v["dead"])
	}
	if n := e.results(id); n != 5 {
		t.Errorf("%d results stored, want the 5 real ones", n)
	}
	// A letter of a result is not work: it is never redriven.
	for _, l := range mustLetters(t, e, id) {
		if err := e.c.Letters().Redrive(ctx, l); err == nil || !strings.Contains(err.Error(), "not redriven") {
			t.Errorf("redrive of the never_queued letter of %s = %v, want a refusal", l.ItemID, err)
		}
	}
}

// TestStreamingResultsForItemsNeverQueuedCountForNothing is the same attack
// on a streaming job, whose items are whatever its principals publish:
// nats.go alone pushes three items and publishes results for three ids it
// never pushed. The ledger the manager keeps of the job's items tells them
// apart: the forged results count for nothing and are moved to the job's
// dead letters (never_queued); the three real ones count.
func TestStreamingResultsForItemsNeverQueuedCountForNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	js := carelessClient(t, e)
	id := e.submit("alice-token", `{"mode":"streaming","deadline":"10m"}`)

	forged := []string{"fake1", "fake2", "fake3"}
	rec := forgeResults(t, e, js, id, forged)
	for _, item := range []string{"a", "b", "c"} {
		stray{job: id, body: itemBody(id, item, item)}.publish(t, js)
	}
	e.work(id, 1, upper)

	bustest.Eventually(t, 20*time.Second, "real results counted, forged ones set aside", func() bool {
		e.m.Reconcile(ctx)
		ws, err := e.c.JobWork(ctx, rec)
		return err == nil && e.results(id) == 3 && ws.Results == 3 && ws.NeverQueued == 0
	})
	got := map[string]bool{}
	for _, l := range mustLetters(t, e, id) {
		if l.Reason != schemas.NeverQueued || !strings.Contains(l.LastError, "never queued") || string(l.Raw) == "" {
			t.Errorf("letter %+v, want reason never_queued naming the item, the result kept", l)
		}
		got[l.ItemID] = true
	}
	if len(got) != len(forged) {
		t.Errorf("never_queued letters for %v, want %v", got, forged)
	}
	if v := e.status("alice-token", id); v["done"] != 3.0 || v["dead"] != 0.0 {
		t.Errorf("view: done %v, dead %v; want 3 and 0", v["done"], v["dead"])
	}
}

// forgeResults publishes a result for each of items on job's subjects with
// js, checks that none counts, and returns the job's record.
func forgeResults(t *testing.T, e *env, js jetstream.JetStream, id string, items []string) *schemas.JobRecord {
	t.Helper()
	ctx := context.Background()
	for _, item := range items {
		body := fmt.Sprintf(`{"job":%q,"item_id":%q,"output":"forged","finished_at":"2026-01-02T03:04:05Z"}`, id, item)
		if _, err := js.Publish(ctx, e.c.Prefix().Results(id, item), []byte(body)); err != nil {
			t.Fatalf("forged result %s: %v", item, err)
		}
	}
	rec, err := e.c.Jobs().Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ws, err := e.c.JobWork(ctx, rec); err != nil || ws.Results != 0 || ws.NeverQueued != len(items) {
		t.Fatalf("work of %s with forged results = %+v (%v), want 0 results and %d never queued", id, ws, err, len(items))
	}
	return rec
}

// results counts the results stored for job.
func (e *env) results(job string) int {
	e.t.Helper()
	st, err := e.c.JetStream().Stream(context.Background(), e.c.Prefix().Stream(schemas.StreamResults))
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(e.c.Prefix().JobResults(job)))
	if err != nil {
		e.t.Fatal(err)
	}
	return int(info.State.Msgs)
}

func mustLetters(t *testing.T, e *env, job string) []*bus.StoredLetter {
	t.Helper()
	var out []*bus.StoredLetter
	for l, err := range e.c.Letters().List(context.Background(), bus.DeadItems, job, false) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}
