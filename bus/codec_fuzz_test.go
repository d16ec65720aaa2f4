package bus

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
)

// FuzzDecodeWorkItem checks the hand-written reader of work items against
// encoding/json: whatever it accepts, encoding/json reads the same way.
func FuzzDecodeWorkItem(f *testing.F) {
	for _, seed := range []string{
		`{"id":"a","job":"j","payload":"p","created_at":"2026-12-01T10:00:00.5Z"}`,
		` { "payload" : "x y" , "id":"1" } `, `{}`, `{"id":"a","id":"b"}`, `{"ID":"a"}`,
		`{"id":"a\"b"}`, `{"id":null}`, `{"id":"é"}`, "{\"id\":\"\xff\"}", `{"created_at":"2026-13-01T00:00:00Z"}`,
		`{"id":"a"} x`, `{"id":"a",}`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast schemas.WorkItem
		if !decodeWorkItem(data, &fast) {
			return
		}
		var slow schemas.WorkItem
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("%q: read by hand as %+v, refused by encoding/json: %v", data, fast, err)
		}
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Fatalf("%q: read by hand differently (-encoding/json +by hand):\n%s", data, diff)
		}
	})
}

// FuzzEncode checks the hand-written writers of work items and results:
// encoding/json reads what they write as it reads its own encoding.
func FuzzEncode(f *testing.F) {
	f.Add("a", "job-1", "payload", "w", 1, int64(1500), int64(1764583200), int64(123456789))
	f.Add("", "", "<&>\"\\\n\x00é\xff\u2028", "", 0, int64(0), int64(0), int64(0))
	f.Add("x", "y", "", "µ", -3, int64(-1), int64(-62135596800), int64(1))
	f.Add("x", "y", "", "", 0, int64(0), int64(253402300800), int64(0))
	f.Fuzz(func(t *testing.T, id, job, payload, worker string, attempt int, d, sec, nsec int64) {
		when := time.Unix(sec, nsec%1e9).UTC()
		if sec == 0 && nsec == 0 {
			when = time.Time{}
		}
		it := &schemas.WorkItem{ID: id, Job: job, Payload: payload, CreatedAt: when}
		res := &schemas.Result{ItemID: id, Job: job, Output: payload, Worker: worker, Attempt: attempt,
			Duration: schemas.Duration(d), FinishedAt: when}
		sameAsJSON(t, it, new(schemas.WorkItem), new(schemas.WorkItem))
		sameAsJSON(t, res, new(schemas.Result), new(schemas.Result))
	})
}

// sameAsJSON decodes encode(m) into got and json.Marshal(m) into want and
// compares them.
func sameAsJSON(t *testing.T, m schemas.Message, got, want any) {
	t.Helper()
	ours, err := encode(m)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := json.Marshal(m)
	if err != nil {
		return // encoding/json refuses it (a year past 9999): validation never lets one through
	}
	if err := json.Unmarshal(ours, got); err != nil {
		t.Fatalf("%s: not JSON: %v", ours, err)
	}
	if err := json.Unmarshal(theirs, want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s read back differently from %s (-encoding/json +ours):\n%s", ours, theirs, diff)
	}
}
