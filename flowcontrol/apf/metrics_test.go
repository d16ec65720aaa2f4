package apf_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
)

func TestMetricsNamesTypesLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := apf.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	clk := eventclock.NewFake(time.Unix(0, 0))
	g, err := apf.New(clk, apf.DefaultConfig(), policy.Defaults(), m)
	if err != nil {
		t.Fatal(err)
	}
	// One admitted request that executes for a second of the fake clock.
	adm, err := g.Admit(context.Background(), policy.Attributes{User: "alice", Groups: []string{"system:authenticated"}, IsResourceRequest: true, Verb: "get", Resource: "pods", Namespace: "x"},
		nil, "")
	if err != nil {
		t.Fatal(err)
	}
	adm.Finish(func() { clk.Step(time.Second) })
	// Gate.Run samples the per-second metrics on the gate's clock.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = g.Run(ctx) }()
	type want struct {
		typ    dto.MetricType
		labels []string
	}
	pf := []string{"flow_schema", "priority_level"}
	pl := []string{"priority_level"}
	wants := map[string]want{
		"apiserver_flowcontrol_dispatched_requests_total":          {dto.MetricType_COUNTER, pf},
		"apiserver_flowcontrol_current_inqueue_requests":           {dto.MetricType_GAUGE, pf},
		"apiserver_flowcontrol_current_inqueue_seats":              {dto.MetricType_GAUGE, pf},
		"apiserver_flowcontrol_current_executing_requests":         {dto.MetricType_GAUGE, pf},
		"apiserver_flowcontrol_current_executing_seats":            {dto.MetricType_GAUGE, pf},
		"apiserver_flowcontrol_request_queue_length_after_enqueue": {dto.MetricType_HISTOGRAM, pf},
		"apiserver_flowcontrol_request_wait_duration_seconds":      {dto.MetricType_HISTOGRAM, []string{"execute", "flow_schema", "priority_level"}},
		"apiserver_flowcontrol_request_execution_seconds":          {dto.MetricType_HISTOGRAM, []string{"flow_schema", "priority_level", "type"}},
		"apiserver_flowcontrol_work_estimated_seats":               {dto.MetricType_HISTOGRAM, pf},
		"apiserver_flowcontrol_nominal_limit_seats":                {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_lower_limit_seats":                  {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_upper_limit_seats":                  {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_current_limit_seats":                {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_demand_seats_high_watermark":        {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_demand_seats_average":               {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_demand_seats_stdev":                 {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_demand_seats_smoothed":              {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_current_r":                          {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_dispatch_r":                         {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_latest_s":                           {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_target_seats":                       {dto.MetricType_GAUGE, pl},
		"apiserver_flowcontrol_next_s_bounds":                      {dto.MetricType_GAUGE, []string{"bound", "priority_level"}},
		"apiserver_flowcontrol_next_discounted_s_bounds":           {dto.MetricType_GAUGE, []string{"bound", "priority_level"}},
		"apiserver_flowcontrol_epoch_advance_total":                {dto.MetricType_COUNTER, []string{"priority_level", "success"}},
		"apiserver_current_inflight_requests":                      {dto.MetricType_GAUGE, []string{"request_kind"}},
		"apiserver_current_inqueue_requests":                       {dto.MetricType_GAUGE, []string{"request_kind"}},
		"apiserver_flowcontrol_priority_level_seat_utilization":    {dto.MetricType_HISTOGRAM, []string{"phase", "priority_level"}},
		"apiserver_flowcontrol_priority_level_request_utilization": {dto.MetricType_HISTOGRAM, []string{"phase", "priority_level"}},
		"apiserver_flowcontrol_read_vs_write_current_requests":     {dto.MetricType_HISTOGRAM, []string{"phase", "request_kind"}},
		"apiserver_flowcontrol_demand_seats":                       {dto.MetricType_HISTOGRAM, pl},
		"apiserver_flowcontrol_seat_fair_frac":                     {dto.MetricType_GAUGE, nil},
	}
	// Run samples on its own goroutine: wait until one tick has set them all.
	sampled := func() bool {
		mfs, _ := reg.Gather()
		have := map[string]bool{}
		for _, mf := range mfs {
			have[mf.GetName()] = true
		}
		for name := range wants {
			if !have[name] {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(apftest.Patience); !sampled(); clk.Step(time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("per-second metrics never sampled")
		}
		time.Sleep(time.Millisecond) // lets Run's goroutine take the tick; the fake clock only moves here
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf
	}
	for name, w := range wants {
		mf := got[name]
		if mf == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if mf.GetType() != w.typ {
			t.Errorf("%s: type %v, want %v", name, mf.GetType(), w.typ)
		}
		var labels []string
		for _, lp := range mf.Metric[0].Label {
			labels = append(labels, lp.GetName())
		}
		slices.Sort(labels)
		if diff := cmp.Diff(w.labels, labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", name, diff)
		}
	}
	wait := got["apiserver_flowcontrol_request_wait_duration_seconds"].Metric[0].GetHistogram()
	var bounds []float64
	for _, b := range wait.Bucket {
		bounds = append(bounds, b.GetUpperBound())
	}
	if diff := cmp.Diff([]float64{0, .005, .02, .05, .1, .2, .5, 1, 2, 5, 10, 15, 30}, bounds); diff != "" {
		t.Errorf("wait buckets (-want +got):\n%s", diff)
	}
	exec := got["apiserver_flowcontrol_request_execution_seconds"].Metric[0]
	if exec.GetHistogram().GetSampleSum() != 1 || !strings.Contains(exec.String(), "regular") {
		t.Errorf("execution: %v, want one regular second", exec)
	}
}
