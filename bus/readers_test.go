package bus_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

func TestReadConfigKeepsAReaderToOneJob(t *testing.T) {
	t.Parallel()
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

func TestReaderTargetPassesOnACallersOwnReadersOnly(t *testing.T) {
	t.Parallel()
	p := schemas.DefaultPrefix
	alice, bob := bus.CallerID("alice-token"), bus.CallerID("bob-token")
	mine, bobs := bus.ReaderName(alice), bus.ReaderName(bob)
	if mine == bus.ReaderName(alice) || !strings.HasPrefix(mine, alice+"-") {
		t.Errorf("ReaderName(%s) = %s: want it and a part that differs each time", alice, mine)
	}
	api := bus.ReaderAPIPrefix(p, alice) + ".CONSUMER."
	for subject, want := range map[string]string{
		api + "MSG.NEXT.PACE_RESULTS." + mine:                     "$JS.API.CONSUMER.MSG.NEXT.PACE_RESULTS." + mine,
		api + "INFO.PACE_RESULTS." + mine:                         "$JS.API.CONSUMER.INFO.PACE_RESULTS." + mine,
		api + "DELETE.PACE_LOGS." + mine:                          "$JS.API.CONSUMER.DELETE.PACE_LOGS." + mine,
		api + "MSG.NEXT.PACE_RESULTS." + bobs:                     "", // another's reader
		api + "INFO.PACE_DECISIONS.pace-actuator":                 "", // a stage's consumer
		api + "INFO.PACE_RESULTS." + alice:                        "", // the id alone
		api + "CREATE.PACE_RESULTS." + mine:                       "", // only reading
		api + "MSG.NEXT.PACE_RESULTS." + mine + ".x":              "",
		"$JS.API.CONSUMER.INFO.PACE_RESULTS." + mine:              "",
		"pace.reader..CONSUMER.INFO.PACE_RESULTS.-x":              "",
		bus.ReaderAPIPrefix(p, bob) + ".STREAM.INFO.PACE_RESULTS": "",
	} {
		got, ok := bus.ReaderTarget(p, subject)
		if got != want || ok != (want != "") {
			t.Errorf("ReaderTarget(%s) = %q, %v; want %q", subject, got, ok, want)
		}
	}
}
