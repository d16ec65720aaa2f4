package visualizer_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/sink/influx"
	"github.com/pace-platform/pace/stages/sink/prom"
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
	t.Parallel()
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
	t.Parallel()
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

// TestPrometheusJobDashboardReadsScrapedMetrics serves the Prometheus
// sink's metrics for a streaming and a batch job with a cost, each with a
// full sample, scrapes /metrics over HTTP as Prometheus would, and checks
// every pace_job_* metric the job dashboard's expressions name against the
// scrape, with the job label they filter on; and that the panels the
// dashboard promises are there.
func TestPrometheusJobDashboardReadsScrapedMetrics(t *testing.T) {
	t.Parallel()
	eta, desired := schemas.Duration(30*time.Second), 0.5
	sink := prom.New(prom.Config{})
	for _, p := range []*schemas.Progress{
		{Job: "stream", At: time.Now(), Mode: schemas.Streaming, JobProgress: .5, TimeProgress: .4, Error: .1, Replicas: 2,
			Done: 5, Throughput: 1, PerReplica: .5, ETA: &eta, ReplicasNeeded: 3, QueueLength: 4, InFlight: 1, Dead: 1,
			Redeliveries: 1, InputRate: 1, OutputRate: 1, Backlog: 5, Lag: eta},
		{Job: "batch", At: time.Now(), Mode: schemas.Batch, Total: 10, Done: 5, Replicas: 1, CostRate: .4, DesiredCost: &desired, Spent: .1},
	} {
		sink.Write(p)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(sink)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	scraped := map[string]bool{} // metric name → seen with a job label
	for line := range strings.SplitSeq(string(body), "\n") {
		if name, labels, ok := strings.Cut(line, "{"); ok && !strings.HasPrefix(line, "#") && strings.Contains(labels, `job="`) {
			scraped[name] = true
		}
	}
	d := readDashboard(t, "pace-job-prometheus.json")
	metric := regexp.MustCompile(`(pace_job_\w+)(\{[^}]*\})?`)
	titles := map[string]bool{}
	for _, pn := range d.Panels {
		titles[pn.Title] = true
		for _, tg := range pn.Targets {
			ms := metric.FindAllStringSubmatch(tg.Expr, -1)
			if len(ms) == 0 {
				t.Errorf("panel %q: %q queries no pace_job_* metric", pn.Title, tg.Expr)
			}
			for _, m := range ms {
				if !scraped[m[1]] {
					t.Errorf("panel %q queries %s, which the scrape lacks", pn.Title, m[1])
				}
				if m[2] != `{job=~"$job"}` {
					t.Errorf("panel %q: %s is not filtered by the job variable", pn.Title, m[0])
				}
			}
		}
	}
	for _, want := range []string{"Job progress vs time progress", "Deadline slack", "Replicas vs decisions", "Rate",
		"Item duration", "Dead letters", "Cost"} {
		if !titles[want] {
			t.Errorf("panel %q missing", want)
		}
	}
}
