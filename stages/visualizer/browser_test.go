package visualizer_test

import (
	"bytes"
	"context"
	"flag"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/borrowing"
	"github.com/pace-platform/pace/flowcontrol/queueset"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/visualizer"
)

var screenshots = flag.String("screenshots", "", "directory the browser test writes its PNG screenshots to (docs/ui: ../../docs/ui); empty: a temporary one")

// chromium finds the browser; the test fails without one (.ci/run installs
// Debian's chromium), because a skipped browser test proves nothing.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("PACE_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: install it (apt-get install -y chromium) or set PACE_CHROMIUM")
	return ""
}

// browser starts headless Chromium for the test and returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 5*time.Minute) // the whole test; each step ends when its page state is reached
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, bustest.MinWait) // a slow machine's browser must not fail a step
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		notice, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("notice").textContent`))
		t.Fatalf("%s: %v (page notice %q)", what, err, notice)
	}
}

func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, bustest.MinWait) // a slow machine's browser must not fail a step
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("notice").textContent + " | " + document.body.innerText.slice(0, 300)`))
		t.Fatalf("%v (page: %q)", err, page)
	}
	return v
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(get(t, ctx, chromedp.Text(chromedp.CSS(sel))))
}

// shot saves a full-page screenshot and checks it is a PNG of the viewport's width.
func shot(t *testing.T, ctx context.Context, name string, width int) {
	t.Helper()
	buf := get(t, ctx, chromedp.FullScreenshot(100))
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if w := img.Bounds().Dx(); w != width {
		t.Errorf("screenshot %s is %d px wide, want %d", name, w, width)
	}
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserWatchesAJobAndStopsIt(t *testing.T) {
	t.Parallel()
	fc := &fakeFC{}
	fc.set([]flowcontrol.LevelDump{
		{Name: "workload-high", Limits: borrowing.Limits{Nominal: 40, Min: 20, Max: 60}, CurrentLimit: 40, QueueSet: queueset.Dump{Dispatched: 120}},
		{Name: "workload-low", Limits: borrowing.Limits{Nominal: 10, Min: 5, Max: 20}, CurrentLimit: 12,
			QueueSet: queueset.Dump{SeatsInUse: 3, Executing: 2, Waiting: 1, Rejected: 4, TimedOut: 1, Dispatched: 9,
				Queues: []queueset.QueueDump{{Executing: []queueset.RequestDump{rq("pace-jobs", "alice", 2), rq("pace-jobs", "bob", 1)},
					Waiting: []queueset.RequestDump{rq("pace-jobs", "alice", 1)}}}}}})
	e := newEnv(t, func(s *visualizer.Stage, _ *bus.Client) { s.SetFlowControl(fc) })
	ctx := browser(t)
	id := e.submit("alice-token", `{"name":"render frames","deadline":"2m","workload":{"items":["1","2","3","4","5","6"]}}`)
	start := time.Now().Add(-3 * time.Second)
	sample := func(i int) {
		e.progress(&schemas.Progress{Job: id, At: start.Add(time.Duration(i) * time.Second), JobProgress: float64(i) / 12,
			TimeProgress: float64(i) / 120, Replicas: 1 + i/2, ReplicasNeeded: 2, Throughput: 0.4, Error: float64(i)/12 - float64(i)/120,
			QueueLength: 6 - i/2})
	}
	sample(0)
	sample(1)
	// A worker's structured line (pace worker logs JSON) and a command's
	// plain one: the log shows the first as level, message and fields.
	for _, line := range []string{`{"time":"2026-12-06T07:00:00Z","level":"INFO","msg":"item stderr","item":"000002","line":"warn: low disk"}`, "plain words"} {
		if err := e.c.Outputs().PublishLog(context.Background(), &schemas.LogLine{Job: id, At: time.Now(), Source: id + "-0", Line: line}); err != nil {
			t.Fatal(err)
		}
	}

	// Signed out, the list asks for a token (its stream needs one); the
	// login form stores her token.
	row := `#jobs tr[data-job="` + id + `"]`
	do(t, ctx, "open the jobs list",
		chromedp.Navigate(e.http.URL+"/ui/"),
		chromedp.Poll[chromedp.Void](`document.getElementById("notice").textContent.startsWith("Sign in with your API token")`,
			chromedp.WithPollingTimeout(0))) // the step's own deadline bounds it
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#jobs tbody tr").length`)); n != 0 {
		t.Errorf("%d rows signed out, want none", n)
	}
	do(t, ctx, "sign in",
		chromedp.SendKeys(chromedp.CSS("#token"), "alice-token"),
		chromedp.Click(chromedp.CSS("#login-save")),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#jobs tbody tr").length`)); n != 1 {
		t.Errorf("%d rows, want alice's one job", n)
	}
	status, owner := text(t, ctx, row+" .status"), text(t, ctx, row+" td:nth-child(2)")
	stored := get(t, ctx, chromedp.Evaluate[string](`sessionStorage.getItem("pace-token")`))
	if status != "ongoing" || owner != "alice" || stored != "alice-token" {
		t.Errorf("row status %q owner %q, token stored %q", status, owner, stored)
	}
	shot(t, ctx, "jobs.png", 1200)

	// Phone: nothing wider than the screen, the table scrolls in its box.
	do(t, ctx, "phone viewport", chromedp.EmulateViewport(390, 844), chromedp.WaitVisible(chromedp.CSS(row)))
	if get(t, ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)) {
		t.Error("the jobs list is wider than a 390 px phone screen")
	}
	shot(t, ctx, "jobs-phone.png", 390)
	do(t, ctx, "desktop viewport", chromedp.EmulateViewport(1200, 1000))

	// Open the job with the keyboard: focus its link and press Enter.
	do(t, ctx, "open the job",
		chromedp.Focus(chromedp.CSS(row+" a")),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`#progress-chart[data-points="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#replicas-chart`)))
	sample(2)
	sample(3)
	do(t, ctx, "see the chart update", chromedp.WaitVisible(chromedp.CSS(`#progress-chart[data-points="4"]`)))
	if pending, name := text(t, ctx, "#job-pending"), text(t, ctx, "#job-name"); pending != "6" || name != "render frames" {
		t.Errorf("pending %q name %q, want 6 and render frames", pending, name)
	}
	do(t, ctx, "see the log", chromedp.Poll[chromedp.Void](`document.getElementById("log").textContent.includes("plain words")`,
		chromedp.WithPollingTimeout(0)))
	if log := text(t, ctx, "#log"); !strings.Contains(log, `INFO item stderr item=000002 line="warn: low disk"`) {
		t.Errorf("log %q, want the structured line as level, message and fields", log)
	}

	// Every control has an accessible name.
	unnamed := get(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("input,button,progress")].filter(el =>
		!(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.textContent.trim()).map(el => el.outerHTML)`))
	if len(unnamed) > 0 {
		t.Errorf("controls without a label: %v", unnamed)
	}

	do(t, ctx, "stop it",
		chromedp.Click(chromedp.CSS("#stop")),
		chromedp.WaitVisible(chromedp.CSS(`#job-status.state-stopped`)),
		chromedp.WaitVisible(chromedp.CSS(`#stop:disabled`)))
	if d := text(t, ctx, "#decisions"); !strings.Contains(d, "stop requested by alice") {
		t.Errorf("decisions %q lack alice's stop", d)
	}
	shot(t, ctx, "job.png", 1200)

	// An admin sees the flow-control page.
	do(t, ctx, "flow control",
		chromedp.Navigate(e.http.URL+"/ui/flowcontrol"),
		chromedp.Click(chromedp.CSS("#logout")),
		chromedp.SendKeys(chromedp.CSS("#token"), "root-token"),
		chromedp.Click(chromedp.CSS("#login-save")),
		chromedp.WaitVisible(chromedp.CSS(`.levels tr[data-level="workload-low"]`)))
	if top := text(t, ctx, ".flows tbody tr:first-child"); !strings.HasPrefix(top, "alice") {
		t.Errorf("top flow %q, want alice's", top)
	}
	shot(t, ctx, "flowcontrol.png", 1200)
}

// TestBrowserShowsTheFlowControlOfEachStage opens the flow-control page as
// pace stage visualizer serves it: first the notice that neither the gate
// nor the manager answers, then one labelled section per answering process.
func TestBrowserShowsTheFlowControlOfEachStage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *visualizer.Stage, c *bus.Client) { s.SetRemoteFlowControl(c) })
	ctx := browser(t)
	do(t, ctx, "sign in as an admin",
		chromedp.Navigate(e.http.URL+"/ui/flowcontrol"),
		chromedp.SendKeys(chromedp.CSS("#token"), "root-token"),
		chromedp.Click(chromedp.CSS("#login-save")),
		chromedp.WaitVisible(chromedp.CSS("#fc-missing")))
	if got := text(t, ctx, "#fc-missing"); !strings.HasPrefix(got, "No answer from the gate or the manager:") {
		t.Errorf("notice %q, want no answer from the gate or the manager", got)
	}

	level := func(name string, nominal, inUse int, flows ...queueset.RequestDump) []flowcontrol.LevelDump {
		return []flowcontrol.LevelDump{{Name: name, Limits: borrowing.Limits{Nominal: nominal, Min: nominal / 2, Max: 2 * nominal},
			CurrentLimit: nominal, QueueSet: queueset.Dump{SeatsInUse: inUse, Executing: len(flows), Dispatched: 10 * nominal,
				Queues: []queueset.QueueDump{{Executing: flows}}}}}
	}
	for _, p := range []struct {
		stage, replica string
		dump           []flowcontrol.LevelDump
	}{
		{"gate", "gate-0", level("workload-low", 10, 2, rq("pace-actuator", "pace-actuator", 2))},
		{"manager", "manager-1", level("workload-low", 20, 1, rq("pace-jobs", "bob", 1))},
		{"manager", "manager-0", level("workload-low", 20, 3, rq("pace-jobs", "alice", 2), rq("pace-jobs", "bob", 1))},
	} {
		fc := &fakeFC{}
		fc.set(p.dump)
		serve(t, e.srv, p.stage, p.replica, fc)
	}
	// The page asks again every few seconds: wait for every answer.
	do(t, ctx, "see every process",
		chromedp.WaitVisible(chromedp.CSS(`.fc-process[data-replica="gate-0"] .flows tbody tr`)),
		chromedp.WaitVisible(chromedp.CSS(`.fc-process[data-replica="manager-0"] .flows tbody tr`)),
		chromedp.WaitVisible(chromedp.CSS(`.fc-process[data-replica="manager-1"] .flows tbody tr`)),
		chromedp.WaitNotVisible(chromedp.CSS("#fc-missing")))
	heads := get(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#fc-processes .fc-source")].map(h => h.textContent)`))
	if want := []string{"Gate (gate-0)", "Manager (manager-0)", "Manager (manager-1)"}; strings.Join(heads, "|") != strings.Join(want, "|") {
		t.Errorf("sections %q, want %q", heads, want)
	}
	if top := text(t, ctx, `.fc-process[data-replica="manager-0"] .flows tbody tr:first-child`); !strings.HasPrefix(top, "alice") {
		t.Errorf("manager-0's top flow %q, want alice's", top)
	}
	shot(t, ctx, "flowcontrol-stages.png", 1200)
}
