package schemas_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
)

var update = flag.Bool("update", false, "rewrite schemas/jsonschema from the Go types")

func TestJSONSchemaFilesUpToDate(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range schemas.All() {
		name, _ := m.Schema()
		if seen[name] {
			t.Fatalf("schema name %q used twice", name)
		}
		seen[name] = true
		got, err := schemas.JSONSchema(m)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("jsonschema", schemas.FileName(m))
		if *update {
			if err := os.MkdirAll("jsonschema", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./schemas -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go test ./schemas -update", path)
		}
	}
	files, _ := filepath.Glob("jsonschema/*.json")
	if len(files) != len(seen) {
		t.Errorf("jsonschema/ holds %d files, want %d (remove stale ones)", len(files), len(seen))
	}
}

func TestValidateNamesTheField(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	minute := schemas.Deadline{After: schemas.Duration(time.Minute)}
	tests := []struct {
		name string
		msg  schemas.Message
		want []string // field paths reported, in order
	}{
		{"valid item", &schemas.WorkItem{ID: "a1", Job: "j1", Payload: "x"}, nil},
		{"item id with dot", &schemas.WorkItem{ID: "a.1", Job: "j1"}, []string{"id"}},
		{"item without job", &schemas.WorkItem{ID: "a"}, []string{"job"}},
		{"batch without deadline", ptr(schemas.JobSpec{Workload: schemas.Workload{Items: []string{"a"}}}.WithDefaults()), []string{"spec.deadline"}},
		{"batch ok", ptr(schemas.JobSpec{Workload: schemas.Workload{Items: []string{"a"}}, Deadline: minute}.WithDefaults()), nil},
		{"streaming with items", ptr(schemas.JobSpec{Mode: schemas.Streaming, Workload: schemas.Workload{Items: []string{"a"}}}.WithDefaults()), []string{"spec.workload"}},
		{"unknown mode", ptr(schemas.JobSpec{Mode: "cron"}.WithDefaults()), []string{"spec.mode"}},
		{"tiny timeout", ptr(schemas.JobSpec{ItemTimeout: schemas.Duration(time.Millisecond)}.WithDefaults()), []string{"spec.item_timeout"}},
		{"huge timeout", ptr(schemas.JobSpec{ItemTimeout: schemas.Duration(25 * time.Hour)}.WithDefaults()), []string{"spec.item_timeout"}},
		{"negative check interval", ptr(schemas.JobSpec{Controller: schemas.ControllerSpec{CheckInterval: -1}}.WithDefaults()), []string{"spec.controller.check_interval"}},
		{"huge check interval", ptr(schemas.JobSpec{Controller: schemas.ControllerSpec{CheckInterval: schemas.Duration(48 * time.Hour)}}.WithDefaults()), []string{"spec.controller.check_interval"}},
		{"huge termination grace", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{TerminationGrace: schemas.Duration(48 * time.Hour)}}.WithDefaults()), []string{"spec.worker.termination_grace"}},
		{"negative lifetime", ptr(schemas.JobSpec{ResourcesLifetime: -1}.WithDefaults()), []string{"spec.resources_lifetime"}},
		{"worker timeout", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{Exec: "cat", Timeout: schemas.Duration(2 * time.Second)}}.WithDefaults()), nil},
		{"tiny worker timeout", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{Exec: "cat", Timeout: schemas.Duration(time.Millisecond)}}.WithDefaults()), []string{"spec.worker.timeout"}},
		{"negative worker timeout", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{Exec: "cat", Timeout: -1}}.WithDefaults()), []string{"spec.worker.timeout"}},
		{"huge worker timeout", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{Exec: "cat", Timeout: schemas.Duration(25 * time.Hour)}}.WithDefaults()), []string{"spec.worker.timeout"}},
		{"lines exec mode", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{Exec: "cat", ExecMode: schemas.ExecLines}}.WithDefaults()), nil},
		{"unknown exec mode", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{Exec: "cat", ExecMode: "batch"}}.WithDefaults()), []string{"spec.worker.exec_mode"}},
		{"exec mode without exec", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{Image: "i", ExecMode: schemas.ExecJSON}}.WithDefaults()), []string{"spec.worker.exec_mode"}},
		{"exec and command", ptr(schemas.JobSpec{Worker: schemas.WorkerSpec{Exec: "cat", Command: []string{"cat"}}}.WithDefaults()), []string{"spec.worker.command"}},
		{"far deadline and long lifetime", ptr(schemas.JobSpec{Mode: schemas.Streaming, Deadline: schemas.Deadline{After: schemas.Duration(1e9 * time.Second)},
			ResourcesLifetime: schemas.Duration(1e9 * time.Second)}.WithDefaults()), nil},
		{"negative result duration", &schemas.Result{ItemID: "i", Job: "j", Duration: -1}, []string{"duration"}},
		{"negative lag and eta", &schemas.Progress{Job: "j", At: at, Lag: -1, ETA: ptr(schemas.Duration(-1))}, []string{"eta", "lag"}},
		{"negative wait", &schemas.AdmissionEvent{PriorityLevel: "p", FlowSchema: "f", Outcome: schemas.Dispatched, Wait: -1, At: at}, []string{"wait"}},
		{"max below min", ptr(schemas.JobSpec{Replicas: schemas.Replicas{Min: 3, Max: 2}}.WithDefaults()), []string{"spec.replicas.max"}},
		{"bad url", ptr(schemas.JobSpec{Workload: schemas.Workload{URL: "ftp://x"}, Deadline: minute}.WithDefaults()), []string{"spec.workload.url"}},
		{"unknown actuator", ptr(schemas.JobSpec{Actuator: schemas.ActuatorSpec{Name: "nomad"}}.WithDefaults()), []string{"spec.actuator.name"}},
		{"decision without reason", &schemas.Decision{Job: "j", At: at, Replicas: 2}, []string{"reason"}},
		{"negative replicas", &schemas.Decision{Job: "j", At: at, Replicas: -1, Reason: "r"}, []string{"replicas"}},
		{"dead letter bad reason", &schemas.DeadLetter{Job: "j", Reason: "gone", At: at}, []string{"reason"}},
		{"dead letter body in an object", &schemas.DeadLetter{Job: "j", Reason: schemas.Malformed, RawObject: "o", RawSize: 1, At: at}, nil},
		{"dead letter object without size", &schemas.DeadLetter{Job: "j", Reason: schemas.Malformed, RawObject: "o", At: at}, []string{"raw_size"}},
		{"dead letter size without object", &schemas.DeadLetter{Job: "j", Reason: schemas.Malformed, RawSize: 1, At: at}, []string{"raw_size"}},
		{"dead letter raw and object", &schemas.DeadLetter{Job: "j", Reason: schemas.Malformed, Raw: []byte{}, RawObject: "o", RawSize: 1, At: at}, []string{"raw_object"}},
		{"dead item with an object", &schemas.DeadLetter{Job: "j", Reason: schemas.MaxDeliveries, RawObject: "o", RawSize: 1, At: at}, []string{"raw_object"}},
		{"refused item", &schemas.DeadLetter{Job: "j", Reason: schemas.RefusedItem, Raw: []byte("x"), At: at}, nil},
		{"refused item in an object", &schemas.DeadLetter{Job: "j", Reason: schemas.RefusedItem, RawObject: "o", RawSize: 1, At: at}, nil},
		{"kube request both resource and path", &schemas.KubeRequest{ID: "r", User: "u", Verb: "get", Resource: "jobs", Path: "/x", At: at}, []string{"resource"}},
		{"rejection without reason", &schemas.AdmissionEvent{PriorityLevel: "p", FlowSchema: "f", Outcome: schemas.Refused, At: at}, []string{"reason"}},
		{"sample negative pending", &schemas.Sample{Job: "j", At: at, Pending: -1}, []string{"pending"}},
		{"log without time", &schemas.LogLine{Job: "j"}, []string{"at"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.msg.Validate()
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("fields = %v, want %v (errors: %v)", got, tt.want, errs)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{`"90s"`, 90 * time.Second, false},
		{`"1h30m"`, 90 * time.Minute, false},
		{`2.5`, 2500 * time.Millisecond, false},
		{`"soon"`, 0, true},
		{`0`, 0, false},
		{`"0s"`, 0, false},
		{`1e-10`, 0, true},   // not zero, yet below 1ns: was read as 0, then defaulted
		{`-1e-10`, 0, true},  // the same below zero
		{`"0.5ns"`, 0, true}, // the same as a string
		{`1.5e-9`, 1, false}, // fractions of a nanosecond are truncated
		{`"1.5ns"`, 1, false},
		{`true`, 0, true},
	}
	for _, tt := range tests {
		var d schemas.Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		if (err != nil) != tt.wantErr || d.D() != tt.want {
			t.Errorf("unmarshal %s = %v, %v; want %v, err %v", tt.in, d.D(), err, tt.want, tt.wantErr)
		}
	}
	b, err := json.Marshal(schemas.Duration(90 * time.Second))
	if err != nil || string(b) != `"1m30s"` {
		t.Errorf("marshal = %s, %v; want \"1m30s\"", b, err)
	}
}

func TestSubjects(t *testing.T) {
	p := schemas.DefaultPrefix
	tests := map[string]string{
		p.Work("j1"):                              "pace.work.j1",
		p.Results("j1", "i1"):                     "pace.results.j1.i1",
		p.JobResults("j1"):                        "pace.results.j1.*",
		p.Ledger("j1", "i1"):                      "pace.ledger.j1.i1",
		p.JobLedger("j1"):                         "pace.ledger.j1.*",
		p.Dead("j1"):                              "pace.dead.j1",
		p.Jobs("j1", schemas.EventStarted):        "pace.jobs.j1.started",
		p.Metrics("j1", schemas.ProgressMetrics):  "pace.metrics.j1.progress",
		p.Decisions("j1"):                         "pace.decisions.j1",
		p.Admission("workload-low", "service-ac"): "pace.admission.workload-low.service-ac",
		p.Stream(schemas.StreamWork):              "PACE_WORK",
		p.Bucket(schemas.BucketJobs):              "pace_jobs",
		p.Control("stop"):                         "pace.control.stop",
		p.FlowControlDump():                       "pace.flowcontrol.dump",
		schemas.WorkConsumer("j1"):                "work-j1",
	}
	for got, want := range tests {
		if got != want {
			t.Errorf("subject = %q, want %q", got, want)
		}
	}
	for name, want := range map[string]string{schemas.WorkConsumer("j1"): "j1", "ledger": ""} {
		got, ok := schemas.WorkConsumerJob(name)
		if !ok {
			got = ""
		}
		if got != want || ok != (want != "") {
			t.Errorf("WorkConsumerJob(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestSubjectJob reads the job from every job-keyed subject, and "unknown"
// from the others and from another installation's subjects.
func TestSubjectJob(t *testing.T) {
	p := schemas.DefaultPrefix
	tests := map[string]string{
		p.Work("j1"):                             "j1",
		p.Results("j1", "i1"):                    "j1",
		p.Ledger("j1", "i1"):                     "j1",
		p.Dead("j1"):                             "j1",
		p.Jobs("j1", schemas.EventStarted):       "j1",
		p.Metrics("j1", schemas.ProgressMetrics): "j1",
		p.Decisions("j1"):                        "j1",
		p.Logs("j1"):                             "j1",
		p.KubeRequests():                         "unknown",
		p.KubeOutcomes():                         "unknown",
		p.Admission("workload-low", "fs"):        "unknown",
		p.Submit():                               "unknown",
		p.Control("stop"):                        "unknown",
		"other.work.j1":                          "unknown",
		"pace.work":                              "unknown",
		"pace.work.not valid":                    "unknown",
	}
	for subject, want := range tests {
		if got := p.SubjectJob(subject); got != want {
			t.Errorf("SubjectJob(%q) = %q, want %q", subject, got, want)
		}
	}
}

func TestDeadlineJSON(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in      string
		want    schemas.Deadline
		wantErr bool
	}{
		{`"90s"`, schemas.Deadline{After: schemas.Duration(90 * time.Second)}, false},
		{`120`, schemas.Deadline{After: schemas.Duration(2 * time.Minute)}, false},
		{`"2030-01-02T03:04:05Z"`, schemas.Deadline{At: at}, false},
		{`"tomorrow"`, schemas.Deadline{}, true},
		{`1e-10`, schemas.Deadline{}, true},
		{`"0001-01-01T00:00:00Z"`, schemas.Deadline{}, true}, // the zero time would read as no deadline
	}
	for _, tt := range tests {
		var d schemas.Deadline
		err := json.Unmarshal([]byte(tt.in), &d)
		if (err != nil) != tt.wantErr || d != tt.want {
			t.Errorf("unmarshal %s = %+v, %v; want %+v, err %v", tt.in, d, err, tt.want, tt.wantErr)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// A refused letter needs dead_letter version 4, a never-queued one 5;
// every other letter is labeled 3, what readers of version 3 read.
func TestDeadLetterVersion(t *testing.T) {
	for _, tt := range []struct {
		reason schemas.DeadReason
		want   int
	}{{schemas.MaxDeliveries, 3}, {schemas.Malformed, 3}, {schemas.RefusedItem, 4}, {schemas.NeverQueued, 5}} {
		if got := schemas.Version(&schemas.DeadLetter{Reason: tt.reason}); got != tt.want {
			t.Errorf("version of a %s letter = %d, want %d", tt.reason, got, tt.want)
		}
	}
	if got := schemas.Version(&schemas.WorkItem{}); got != 1 {
		t.Errorf("version of a work item = %d, want 1 (its Schema's)", got)
	}
}

// InWorkload accepts exactly the ids WorkloadItemID gives items 1..total.
func TestInWorkload(t *testing.T) {
	const total = 1_000_001
	for _, n := range []int{1, 9, 999_999, 1_000_000, total} {
		if id := schemas.WorkloadItemID(n); !schemas.InWorkload(id, total) {
			t.Errorf("InWorkload(%q, %d) = false for item %d", id, total, n)
		}
	}
	for _, id := range []string{"", "000000", "1", "00001", "0000001", "+00001", "-00001", "00000a",
		"1000002", "fake1", "99999999999", " 000001"} {
		if schemas.InWorkload(id, total) {
			t.Errorf("InWorkload(%q, %d) = true, want false", id, total)
		}
	}
	if schemas.InWorkload("000006", 5) {
		t.Error("InWorkload(000006, 5) = true: beyond the workload")
	}
}
