package visualizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/sink/influx"
)

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Query string `json:"query"` // InfluxQL
			Expr  string `json:"expr"`  // PromQL
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T, name string) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", name))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no title, uid or panels", name)
	}
	return d
}

// TestInfluxDashboardReadsWrittenFields checks every query of the job
// dashboard against the points the InfluxDB sink writes for a full sample,
// and that Asperathos' three panels are there.
func TestInfluxDashboardReadsWrittenFields(t *testing.T) {
	eta := schemas.Duration(30 * time.Second)
	p := &schemas.Progress{Job: "j", At: time.Now(), JobProgress: .5, TimeProgress: .4, Replicas: 2, Total: 10, Done: 5,
		Throughput: 1, PerReplica: .5, ETA: &eta, ReplicasNeeded: 3, QueueLength: 4, InFlight: 1, Dead: 1, Redeliveries: 1,
		Mode: schemas.Streaming, InputRate: 1, OutputRate: 1, Backlog: 5, Lag: eta}
	written := map[string]bool{}
	for _, pt := range influx.Points(p) {
		for _, f := range pt.FieldList() {
			written[pt.Name()+"."+f.Key] = true
		}
	}
	d := readDashboard(t, "pace-job-influxdb.json")
	q := regexp.MustCompile(`^SELECT mean\("(\w+)"\) FROM "(\w+)" WHERE \("job" =~ /\^\$job\$/\) AND \$timeFilter GROUP BY time\(\$__interval\), "job" fill\(null\)$`)
	titles := map[string]bool{}
	for _, pn := range d.Panels {
		titles[pn.Title] = true
		for _, tg := range pn.Targets {
			m := q.FindStringSubmatch(tg.Query)
			if m == nil {
				t.Errorf("panel %q: query %q is not of the expected shape", pn.Title, tg.Query)
				continue
			}
			if !written[m[2]+"."+m[1]] {
				t.Errorf("panel %q reads %s.%s, which the InfluxDB sink does not write (it writes %v)", pn.Title, m[2], m[1], written)
			}
		}
	}
	for _, want := range []string{"Job-Progress vs Time-Progress", "Replicas", "Application-Progress.Error"} {
		if !titles[want] {
			t.Errorf("Asperathos' panel %q missing", want)
		}
	}
}

// recorder is a prometheus.Registerer that keeps the names of what is registered.
type recorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}
func (r *recorder) Unregister(prometheus.Collector) bool { return true }

// TestFlowControlDashboardReadsExportedMetrics checks every metric the APF
// dashboard queries against the metrics apf.NewMetrics registers.
func TestFlowControlDashboardReadsExportedMetrics(t *testing.T) {
	r := &recorder{names: map[string]bool{}}
	if _, err := apf.NewMetrics(r); err != nil {
		t.Fatal(err)
	}
	d := readDashboard(t, "pace-flowcontrol-prometheus.json")
	metric := regexp.MustCompile(`apiserver_flowcontrol_\w+`)
	seen := 0
	for _, pn := range d.Panels {
		for _, tg := range pn.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				seen++
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if r.names[strings.TrimSuffix(name, suffix)] {
						base = strings.TrimSuffix(name, suffix)
					}
				}
				if !r.names[base] {
					t.Errorf("panel %q queries %s, which is not registered", pn.Title, name)
				}
			}
		}
	}
	if seen == 0 {
		t.Error("no apiserver_flowcontrol_* metric queried")
	}
}
