// Package apftest holds what the tests of a Gate and of its front ends
// share: a gate with its metrics on a registry of its own, readers of those
// metrics, and small policies.
package apftest

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
)

// Patience bounds the tests' waits on goroutines and real servers. A wait
// ends as soon as what it waits for happens, so a generous bound costs a
// passing test nothing, while a slow machine (-race, two cores, packages
// tested in parallel) must not fail one.
const Patience = 2 * time.Minute

// Find returns the Series of name whose labels include want, nil if none.
func Find(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	Series:
		for _, m := range mf.Metric {
			got := map[string]string{}
			for _, lp := range m.Label {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue Series
				}
			}
			return m
		}
	}
	return nil
}

// Gauge returns the value of the Gauge (or counter) Series of name whose
// labels include want, and whether it exists.
func Gauge(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	m := Find(t, reg, name, want)
	switch {
	case m == nil:
		return 0, false
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	}
	return m.GetGauge().GetValue(), true
}

// NewGate builds a gate on clk with cfg and the default policy overlaid by
// the objects of objsYAML (none when empty), its metrics on a fresh registry.
func NewGate(t testing.TB, clk eventclock.Interface, cfg apf.Config, objsYAML string) (*apf.Gate, *prometheus.Registry) {
	t.Helper()
	objs, err := policy.Load(strings.NewReader(objsYAML))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := apf.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := apf.New(clk, cfg, policy.Overlay(policy.Defaults(), objs), m)
	if err != nil {
		t.Fatal(err)
	}
	return g, reg
}

// Series returns the label sets of the gathered Series of name.
func Series(t testing.TB, reg *prometheus.Registry, name string) []map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, labels)
		}
	}
	return out
}

// Histogram returns the sample count and sum of the Histogram Series of name
// whose labels include want (zero when there is none).
func Histogram(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) (uint64, float64) {
	t.Helper()
	h := Find(t, reg, name, want).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// TwoFlows is a two-seat level of 64 queues, one per flow (hand size 1), whose
// flows are its users.
const TwoFlows = `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: split}
spec:
  type: Limited
  limited: {nominalConcurrencyShares: 100, lendablePercent: 0, borrowingLimitPercent: 0, limitResponse: {type: Queue, queuing: {queues: 64, handSize: 1, queueLengthLimit: 10}}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: by-user}
spec:
  matchingPrecedence: 500
  priorityLevelConfiguration: {name: split}
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: Group, group: {name: "system:authenticated"}}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
`

// OneQueuedSeat queues everyone's requests behind a single seat.
const OneQueuedSeat = `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: tiny}
spec:
  type: Limited
  limited: {nominalConcurrencyShares: 100, lendablePercent: 0, borrowingLimitPercent: 0, limitResponse: {type: Queue, queuing: {queues: 1, handSize: 1, queueLengthLimit: 10}}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: everyone}
spec:
  matchingPrecedence: 500
  priorityLevelConfiguration: {name: tiny}
  rules:
  - subjects: [{kind: Group, group: {name: "system:authenticated"}}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
`

// Waiting returns the requests Waiting in level, -1 if d has no such level.
func Waiting(d []flowcontrol.LevelDump, level string) int {
	for _, l := range d {
		if l.Name == level {
			return l.QueueSet.Waiting
		}
	}
	return -1
}

// HistogramTotals returns the sum and count of a Histogram over its Series.
func HistogramTotals(t testing.TB, reg *prometheus.Registry, name string) (sum float64, count uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				sum += m.GetHistogram().GetSampleSum()
				count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return sum, count
}
