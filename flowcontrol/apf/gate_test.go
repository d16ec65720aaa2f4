package apf_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
)

// aliceAlone gives alice's requests a level of their own, one seat wide.
const aliceAlone = `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: alone}
spec: {type: Limited, limited: {nominalConcurrencyShares: 100, lendablePercent: 0, borrowingLimitPercent: 0, limitResponse: {type: Reject}}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: alice}
spec:
  matchingPrecedence: 500
  priorityLevelConfiguration: {name: alone}
  rules:
  - subjects: [{kind: User, user: {name: alice}}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
`

// TestReconfigureKeepsQueuedRequests: a request queued under the old
// configuration is dispatched by it after a reconfiguration, while new
// requests are classified by the new one.
func TestReconfigureKeepsQueuedRequests(t *testing.T) {
	objs, err := policy.Load(strings.NewReader(apftest.OneQueuedSeat))
	if err != nil {
		t.Fatal(err)
	}
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.Config{MaxRequestsInflight: 1}, policy.Overlay(policy.Defaults(), objs), nil)
	if err != nil {
		t.Fatal(err)
	}
	attrs := policy.Attributes{User: "alice", Groups: []string{"system:authenticated"}, Verb: "get", Path: "/x"}
	first, err := g.Admit(context.Background(), attrs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		adm, err := g.Admit(context.Background(), attrs, nil, "")
		if err == nil {
			adm.Finish(func() {})
		}
		queued <- err
	}()
	// Wait until the second request is queued in the old engine.
	for deadline := time.Now().Add(apftest.Patience); ; time.Sleep(5 * time.Millisecond) {
		if d := g.Dump(); apftest.Waiting(d, "tiny") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("second request never queued")
		}
	}
	if err := g.Reconfigure(context.Background(), policy.Defaults()); err != nil {
		t.Fatal(err)
	}
	if got := g.Classify(attrs).FlowSchema.Name; got != "global-default" {
		t.Errorf("after reconfiguration: %s, want global-default", got)
	}
	first.Finish(func() {})
	select {
	case err := <-queued:
		if err != nil {
			t.Errorf("queued request: %v, want dispatched by the old configuration", err)
		}
	case <-time.After(apftest.Patience):
		t.Fatal("queued request never dispatched")
	}
}

// TestReconfigureSameLevelsKeepsSeats: re-reading an equal configuration (or
// one that changes only FlowSchemas) keeps the engine, so seats held before
// still count.
func TestReconfigureSameLevelsKeepsSeats(t *testing.T) {
	objs, err := policy.Load(strings.NewReader(aliceAlone))
	if err != nil {
		t.Fatal(err)
	}
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.Config{MaxRequestsInflight: 1}, policy.Overlay(policy.Defaults(), objs), nil)
	if err != nil {
		t.Fatal(err)
	}
	attrs := policy.Attributes{User: "alice", Groups: []string{"system:authenticated"}, Verb: "get", Path: "/x"}
	held, err := g.Admit(context.Background(), attrs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reconfigure(context.Background(), policy.Overlay(policy.Defaults(), objs)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Admit(context.Background(), attrs, nil, ""); err == nil {
		t.Error("second request admitted while the only seat is held across a reconfiguration")
	}
	held.Finish(func() {})
}
