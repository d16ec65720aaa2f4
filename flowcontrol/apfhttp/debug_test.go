package apfhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
)

// TestDebugDumpsAsKube reads the text dumps as kube-apiserver (v0.37)
// prints them: levels sorted by name; a request withdrawn when its wait
// ended counted as rejected and cancelled, never timed out; a level removed
// while it still runs a request shown as quiescing; requests in rows as
// wide as the header, includeRequestDetails or not.
func TestDebugDumpsAsKube(t *testing.T) {
	g, _ := apftest.NewGate(t, eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.Config{MaxRequestsInflight: 1}, apftest.OneQueuedSeat)
	srv := httptest.NewServer(apfhttp.DebugHandler(g))
	defer srv.Close()
	dump := func(name string) [][]string {
		t.Helper()
		resp, err := http.Get(srv.URL + apfhttp.DebugPrefix + name)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var rows [][]string
		for line := range strings.SplitSeq(strings.TrimRight(string(body), "\n"), "\n") {
			cols := strings.Split(line, ",")
			for i := range cols {
				cols[i] = strings.TrimSpace(cols[i])
			}
			rows = append(rows, cols)
		}
		return rows
	}
	level := func(rows [][]string, name string) map[string]string {
		t.Helper()
		for _, r := range rows[1:] {
			if r[0] == name {
				m := map[string]string{}
				for i, h := range rows[0] {
					m[h] = r[i]
				}
				return m
			}
		}
		t.Fatalf("no row for %s in %v", name, rows)
		return nil
	}

	attrs := policy.Attributes{User: "alice", Groups: []string{"system:authenticated"}, Verb: "get", Path: "/x"}
	first, err := g.Admit(context.Background(), attrs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, giveUp := context.WithCancel(context.Background())
	withdrawn := make(chan error, 1)
	go func() { _, err := g.Admit(ctx, attrs, nil, ""); withdrawn <- err }()
	for deadline := time.Now().Add(apftest.Patience); apftest.Waiting(g.Dump(), "tiny") != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("second request never queued")
		}
	}
	requests := dump("dump_requests?includeRequestDetails=1")
	for _, r := range requests {
		if len(r) != 10 {
			t.Errorf("dump_requests row of %d columns, want 10: %v", len(r), r)
		}
	}
	if len(requests) != 3 { // header, the executing request, the waiting one
		t.Errorf("dump_requests: %v, want the header and 2 requests", requests)
	}
	giveUp()
	if err := <-withdrawn; err == nil {
		t.Fatal("the withdrawn request was admitted")
	}

	levels := dump("dump_priority_levels")
	names := make([]string, 0, len(levels)-1)
	for _, r := range levels[1:] {
		names = append(names, r[0])
	}
	if !slices.IsSorted(names) {
		t.Errorf("levels %v, want them sorted by name", names)
	}
	tiny := level(levels, "tiny")
	if tiny["RejectedRequests"] != "1" || tiny["CancelledRequests"] != "1" || tiny["TimedoutRequests"] != "0" ||
		tiny["ExecutingRequests"] != "1" || tiny["ActiveQueues"] != "0" || tiny["IsIdle"] != "false" || tiny["IsQuiescing"] != "false" {
		t.Errorf("tiny after a withdrawn request = %v, want 1 rejected, 1 cancelled, 0 timed out, 1 executing, no active queue", tiny)
	}

	// Removed from the configuration while it runs a request: quiescing.
	if err := g.Reconfigure(context.Background(), policy.Defaults()); err != nil {
		t.Fatal(err)
	}
	if tiny := level(dump("dump_priority_levels"), "tiny"); tiny["IsQuiescing"] != "true" {
		t.Errorf("tiny removed while running a request = %v, want quiescing", tiny)
	}
	first.Finish(func() {})
}
