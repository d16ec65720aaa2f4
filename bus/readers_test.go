package bus_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

func TestReadConfigKeepsAReaderToOneJob(t *testing.T) {
	p := schemas.DefaultPrefix
	for _, tc := range []struct {
		req     bus.ReadRequest
		job     string // the job read, "" for every job's
		invalid string // the field named by the error; "" for none
	}{
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.results.j1.>"}, "j1", ""},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.results.j1.item-7"}, "j1", ""},
		{bus.ReadRequest{Stream: "PACE_METRICS", FilterSubject: "pace.metrics.j1.progress", DeliverPolicy: "last"}, "j1", ""},
		{bus.ReadRequest{Stream: "PACE_METRICS", FilterSubject: "pace.metrics.j1.dead"}, "j1", ""},
		{bus.ReadRequest{Stream: "PACE_JOBS", FilterSubject: "pace.jobs.j1.*", DeliverPolicy: "by_start_sequence", OptStartSeq: 9}, "j1", ""},
		{bus.ReadRequest{Stream: "PACE_JOBS", FilterSubject: "pace.jobs.*.*"}, "", ""},
		{bus.ReadRequest{Stream: "PACE_ADMISSION", FilterSubject: "pace.admission.>"}, "", ""},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.results.>"}, "", "filter_subject"},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.results.j1"}, "", "filter_subject"},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.dead.j1"}, "", "filter_subject"},
		{bus.ReadRequest{Stream: "PACE_METRICS", FilterSubject: "pace.metrics.j1.raw"}, "", "filter_subject"},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.results.j1.a>"}, "", "filter_subject"},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace..j1"}, "", "filter_subject"},
		{bus.ReadRequest{Stream: "PACE_WORK", FilterSubject: "pace.work.j1"}, "", "stream"},
		{bus.ReadRequest{Stream: "KV_pace_jobs", FilterSubject: "$KV.pace_jobs.j1"}, "", "stream"},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.results.j1.>", DeliverPolicy: "first"}, "", "deliver_policy"},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.results.j1.>", DeliverPolicy: "by_start_sequence"}, "", "opt_start_seq"},
		{bus.ReadRequest{Stream: "PACE_RESULTS", FilterSubject: "pace.results.j1.>", OptStartSeq: 3}, "", "opt_start_seq"},
	} {
		cfg, job, errs := tc.req.ReadConfig(p)
		switch {
		case tc.invalid == "" && len(errs) > 0:
			t.Errorf("%+v: %v", tc.req, errs)
		case tc.invalid != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.invalid)):
			t.Errorf("%+v: errors %v, want one naming %s", tc.req, errs, tc.invalid)
		case tc.invalid == "" && job != tc.job:
			t.Errorf("%+v: job %q, want %q", tc.req, job, tc.job)
		case tc.invalid == "" && (cfg.DeliverSubject != "" || cfg.AckPolicy != jetstream.AckNonePolicy ||
			cfg.FilterSubject != tc.req.FilterSubject || cfg.InactiveThreshold != bus.ReaderIdle):
			t.Errorf("%+v: consumer %+v, want a pull consumer of the filter without acks, expiring", tc.req, cfg)
		}
	}
}
