package schemas_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
)

// TestApplyEvent replays a job's events into its record, as the manager's
// Recover does, and checks what each event may and may not change.
func TestApplyEvent(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	spec := &schemas.JobSpec{Name: "j"}
	events := []struct {
		ev      schemas.JobEvent
		changes bool
	}{
		{schemas.JobEvent{Type: schemas.EventScaled, Replicas: 9, At: at(0)}, false}, // before its creation: no record
		{schemas.JobEvent{Type: schemas.EventCreated, Spec: spec, Total: 5, At: at(1)}, true},
		{schemas.JobEvent{Type: schemas.EventStarted, Total: 5, Replicas: 1, At: at(2)}, true},
		{schemas.JobEvent{Type: schemas.EventStarted, Total: 7, Replicas: 4, At: at(3)}, false}, // started once
		{schemas.JobEvent{Type: schemas.EventScaled, Replicas: 3, At: at(4)}, true},
		{schemas.JobEvent{Type: schemas.EventStopping, Reason: "asked", At: at(5)}, true},
		{schemas.JobEvent{Type: schemas.EventStopped, State: schemas.Stopped, Reason: "drained", At: at(6)}, true},
		{schemas.JobEvent{Type: schemas.EventCompleted, State: schemas.Completed, At: at(7)}, false}, // final already
		{schemas.JobEvent{Type: schemas.EventCleaned, At: at(8)}, true},
		{schemas.JobEvent{Type: schemas.EventDeleted, At: at(9)}, false}, // the bucket's key goes, not the record's fields
	}
	var rec *schemas.JobRecord
	for i, e := range events {
		seq := uint64(i + 1)
		next := schemas.ApplyEvent(rec, &e.ev, seq)
		if (next != nil) != e.changes {
			t.Fatalf("event %d (%s): changed = %v, want %v", seq, e.ev.Type, next != nil, e.changes)
		}
		if next != nil {
			if next.Seq != seq {
				t.Errorf("event %d: record Seq = %d", seq, next.Seq)
			}
			if again := schemas.ApplyEvent(next, &e.ev, seq); again != nil {
				t.Errorf("event %d applied twice changed the record again", seq)
			}
			rec = next
		}
	}
	want := &schemas.JobRecord{Spec: *spec, State: schemas.Stopped, Total: 5, Replicas: 3, StopRequested: true,
		Reason: "drained", CreatedAt: at(1), StartedAt: at(2), FinishedAt: at(6), CleanedAt: at(8), Seq: 9}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("record after the events (-want +got):\n%s", diff)
	}
}

// TestApplyEventOvertaken applies events out of their stream order, as two
// writers do when the actuator records a scale between the manager's
// publishing a final event and its updating the record: the final state
// still lands, the replicas stay the later event's.
func TestApplyEventOvertaken(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	rec := schemas.ApplyEvent(nil, &schemas.JobEvent{Type: schemas.EventCreated, Spec: &schemas.JobSpec{Name: "j"}, At: at}, 1)
	apply := func(ev schemas.JobEvent, seq uint64) {
		t.Helper()
		next := schemas.ApplyEvent(rec, &ev, seq)
		if next == nil {
			t.Fatalf("%s event %d changed nothing", ev.Type, seq)
		}
		if again := schemas.ApplyEvent(next, &ev, seq); again != nil {
			t.Errorf("%s event %d applied twice changed the record again", ev.Type, seq)
		}
		rec = next
	}
	apply(schemas.JobEvent{Type: schemas.EventScaled, Replicas: 2, At: at}, 3)
	apply(schemas.JobEvent{Type: schemas.EventStarted, Total: 4, Replicas: 1, At: at}, 2) // overtaken by the scale
	apply(schemas.JobEvent{Type: schemas.EventScaled, Replicas: 0, At: at}, 5)
	apply(schemas.JobEvent{Type: schemas.EventFailed, State: schemas.Failed, Reason: "policy", At: at}, 4)
	if stale := schemas.ApplyEvent(rec, &schemas.JobEvent{Type: schemas.EventScaled, Replicas: 7, At: at}, 4); stale != nil {
		t.Errorf("an overtaken scale set the replicas to %d", stale.Replicas)
	}
	if rec.State != schemas.Failed || rec.Reason != "policy" || rec.Replicas != 0 || rec.Total != 4 || rec.Seq != 5 {
		t.Errorf("record = state %s reason %q replicas %d total %d seq %d; want failed, policy, 0, 4, 5",
			rec.State, rec.Reason, rec.Replicas, rec.Total, rec.Seq)
	}
}
