//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

const (
	defaultItems = 20_000
	// budget bounds the whole test: a hang fails instead of blocking CI.
	budget = 5*time.Minute + 30*time.Second
	// leaseTTL is the stages' --lease-ttl: the longest failover of a
	// killed leader.
	leaseTTL = 3 * time.Second
)

// fault is a kind of failure injected during the run.
type fault string

const (
	killWorker  fault = "worker"      // a worker process: one the gate runs, or the pace worker --exec
	killNATS    fault = "nats"        // one of the three NATS servers
	killGate    fault = "gate-leader" // the gate's leader, and with it the workers it runs
	killLeader  fault = "leader"      // the leader of the manager or the controller
	killManager fault = "manager"     // a manager replica, leader or not
	killStage   fault = "stage"       // a single-replica stage: collector, processor or actuator
	killAll     fault = "system"      // every process, NATS included
)

// event is one fault, injected once the job has this many results.
type event struct {
	at    int
	fault fault
}

// schedule returns the faults of a run: every kind of kill at random points
// of the first half of the job (workers and NATS servers twice), the restart
// of the whole system between 55% and 70%, and three more kills afterwards.
func schedule(rng *rand.Rand, n int) (before []event, restartAt int, after []event) {
	at := func(lo, hi float64) int { return int((lo + rng.Float64()*(hi-lo)) * float64(n)) }
	for _, f := range []fault{killWorker, killWorker, killNATS, killNATS, killGate, killLeader, killManager, killStage} {
		before = append(before, event{at: at(0.04, 0.5), fault: f})
	}
	slices.SortFunc(before, func(a, b event) int { return a.at - b.at })
	restartAt = at(0.55, 0.7)
	for _, f := range []fault{killWorker, killNATS, killGate} {
		after = append(after, event{at: at(0.72, 0.92), fault: f})
	}
	slices.SortFunc(after, func(a, b event) int { return a.at - b.at })
	return before, restartAt, after
}

// stage is a stage of the pipeline and how many replicas the test runs.
type stage struct {
	name     string
	replicas int
}

// stages are the processes a batch job needs: two replicas of the manager
// (API on both, lifecycle on the leader), the gate (which runs the workers)
// and the controller; the others once.
var stages = []stage{
	{"manager", 2}, {"collector", 1}, {"processor", 1}, {"controller", 2}, {"actuator", 1}, {"gate", 2},
}

// system is Pace running as separate processes on a NATS cluster.
type system struct {
	t      *testing.T
	rng    *rand.Rand
	g      *Group
	nats   *NATSCluster
	c      *bus.Client
	stages map[string][]*Proc
	apis   []string // the managers' base URLs
	auth   *busAuth
	cli    *Proc // pace worker --exec, started by the test
	job    string

	mu       sync.Mutex // guards kills and restarts
	kills    map[fault]int
	restarts int
	pending  sync.WaitGroup // restarts not done yet
	natsBusy sync.Mutex     // held from a server's kill until it is healthy again
}

func TestChaos(t *testing.T) {
	seed, items := chaosSeed(t), chaosItems(t)
	t.Logf("seed=%d (PACE_CHAOS_SEED=%d replays this schedule)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	began := time.Now()

	dir := workDir(t)
	s := &system{t: t, rng: rng, g: NewGroup(t, dir), stages: map[string][]*Proc{}, kills: map[fault]int{},
		auth: newBusAuth(t, dir)}
	t.Cleanup(s.pending.Wait) // a test that stops early still waits for its restarts
	s.nats = StartNATSCluster(t, s.g, bins.NATSServer, s.auth.conf, dir, 3, s.auth.serverEnv...)
	s.waitNATS(ctx)
	s.startStages(ctx)
	c, err := bus.Connect(ctx, s.nats.URL(), bus.WithName("chaos-test"), bus.WithConnectTimeout(0), s.auth.admin())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background()) //nolint:errcheck // end of test
	s.c = c
	s.checkReplicas(ctx)

	payloads := make([]string, items)
	for i := range payloads {
		payloads[i] = fmt.Sprintf("payload-%06d", i+1)
	}
	s.job = s.submit(ctx, payloads)
	t.Logf("job %s: %d items submitted in %s", s.job, items, time.Since(began).Round(time.Millisecond))
	// The workers the gate runs are SDK workers (this test binary); this one
	// is `pace worker --exec`, a process per item as users run it.
	s.cli = s.g.Add("pace-worker", bins.Pace, []string{"worker", s.job, "--nats", s.nats.URL(), "--token", tenantToken,
		"--exec", `read l; echo "$l"`, "-c", "2", "--id", "cli", "--connect-timeout", "0", "--log-format", "json"}).Supervise().DoneOn(3)
	s.g.Start(s.cli)

	before, restartAt, after := schedule(rng, items)
	for _, ev := range before {
		s.waitResults(ctx, ev.at)
		s.inject(ctx, ev.fault)
	}
	s.waitResults(ctx, restartAt)
	s.pending.Wait()
	s.restartAll(ctx)
	for _, ev := range after {
		s.waitResults(ctx, ev.at)
		s.inject(ctx, ev.fault)
	}
	drained := s.waitResultsOrDrained(ctx, items)
	s.pending.Wait()
	var view jobView
	if !drained {
		view = s.waitCompleted(ctx)
	}
	s.checkReplicas(ctx) // kills and restarts, the whole system's included, kept every stream replicated

	results := retry(t, ctx, "read the results", func(ctx context.Context) ([]*schemas.Result, error) {
		return c.Outputs().StoredResults(ctx, s.job)
	})
	dead := retry(t, ctx, "read the dead letters", func(ctx context.Context) ([]*schemas.DeadLetter, error) {
		return c.Letters().Stored(ctx, s.job)
	})
	var summary struct {
		ItemsOK   int `json:"items_ok"`
		ItemsDead int `json:"items_dead"`
	}
	s.get(ctx, "/submissions/"+s.job+"/report/summary", &summary)
	f := count(s.job, payloads, results)
	f.kills, f.restarts, f.seed, f.took = s.kills, s.restarts, seed, time.Since(began)
	f.crashes = s.crashes()
	t.Log(f.detail())
	t.Log(s.cpu())

	if f.duplicates != 0 || f.lost != 0 || f.wrong != 0 {
		t.Errorf("exactly-once broken: %s, %d results with another item's output", f.line(), f.wrong)
	}
	if len(dead) > 0 {
		t.Errorf("%d dead letters, want none; first: %+v", len(dead), dead[0])
	}
	if drained {
		t.Errorf("the job's queue is empty but only %d of %d items have a result", f.results, items)
	} else if view.Total != items || view.Done != f.results || view.Dead != 0 {
		t.Errorf("job view: total %d, done %d, dead %d; want %d, %d, 0", view.Total, view.Done, view.Dead, items, f.results)
	}
	if summary.ItemsOK != f.results || summary.ItemsDead != 0 {
		t.Errorf("report summary: items_ok %d, items_dead %d; want %d, 0", summary.ItemsOK, summary.ItemsDead, f.results)
	}
	if t.Failed() {
		return
	}
	if out := os.Getenv("PACE_CHAOS_FIGURES"); out != "" {
		if err := os.WriteFile(out, []byte(f.detail()+"\n"+f.line()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *system) waitNATS(ctx context.Context) {
	s.t.Helper()
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.nats.WaitHealthy(hctx); err != nil {
		s.t.Fatal(err)
	}
}

// startStages starts every stage process, the first manager alone so that
// one process provisions the streams before the others check them, and
// waits until the managers' APIs answer. Stages are supervised: one that
// exits by itself (e.g. on a time-out at start) is restarted.
func (s *system) startStages(ctx context.Context) {
	s.t.Helper()
	for _, st := range stages {
		for i := range st.replicas {
			id := fmt.Sprintf("%s-%d", st.name, i+1)
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(s.t))
			args := []string{"stage", st.name, "--nats", s.nats.URL(), "--http", addr, "--identity", id,
				"--lease-ttl", leaseTTL.String(), "--connect-timeout", "0", "--log-format", "json"}
			if st.name == "gate" {
				args = append(args, "--worker-grace", "2s")
			}
			authArgs, env := s.auth.stage(st.name)
			p := s.g.Add(id, bins.Pace, append(args, authArgs...), env...).Supervise()
			s.stages[st.name] = append(s.stages[st.name], p)
			if st.name == "manager" {
				s.apis = append(s.apis, "http://"+addr)
			}
		}
	}
	first := s.stages["manager"][0]
	s.g.Start(first)
	s.waitAPIs(ctx, s.apis[0])
	for _, st := range stages {
		for _, p := range s.stages[st.name] {
			s.g.Start(p)
		}
	}
	s.waitAPIs(ctx, s.apis...)
}

// waitAPIs waits until the managers at apis answer /readyz.
func (s *system) waitAPIs(ctx context.Context, apis ...string) {
	s.t.Helper()
	for _, api := range apis {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+"/readyz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				s.t.Fatalf("manager %s not ready: %v", api, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// checkReplicas makes sure every stream, bucket and object store of the bus
// has three replicas: the cluster is really used, and no restart (a stage
// provisioning while the servers recover) scaled one down.
func (s *system) checkReplicas(ctx context.Context) {
	s.t.Helper()
	names := retry(s.t, ctx, "list the streams", func(ctx context.Context) ([]string, error) {
		var names []string
		l := s.c.JetStream().StreamNames(ctx)
		for name := range l.Name() {
			names = append(names, name)
		}
		return names, l.Err()
	})
	if len(names) < 10 {
		s.t.Fatalf("streams %v: the bus is not provisioned", names)
	}
	for _, name := range names {
		st := retry(s.t, ctx, "stream "+name, func(ctx context.Context) (jetstream.Stream, error) {
			return s.c.JetStream().Stream(ctx, name)
		})
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			s.t.Errorf("stream %s has %d replicas, want 3", name, r)
		}
	}
}

// submit posts a batch job of payloads to a manager and returns its id.
func (s *system) submit(ctx context.Context, payloads []string) string {
	s.t.Helper()
	spec := map[string]any{
		"name": "chaos", "mode": "batch", "deadline": "10m",
		"workload": map[string]any{"items": payloads},
		"worker": map[string]any{"command": []string{workerBin, "-test.run=^$"},
			"env": map[string]string{envWorker: "1"}},
		"replicas":   map[string]int{"min": 2, "max": 4, "initial": 3},
		"controller": map[string]string{"name": "deadline"},
		// Short leases bring a killed worker's items back quickly; a high
		// delivery limit keeps items that several kills hit in a row from
		// being dead-lettered, which would be a configured outcome, not a loss.
		"item_timeout": "5s", "max_deliveries": 20,
	}
	body, err := json.Marshal(spec)
	if err != nil {
		s.t.Fatal(err)
	}
	// The replica that is not the manager's leader takes the submission, so
	// the leader's job checks see a job another process is still creating.
	api := s.apis[0]
	if s.leader(ctx, "manager") == s.stages["manager"][0] {
		api = s.apis[1]
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodPost, api+"/submissions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tenantToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("submit: %v", err)
	}
	defer resp.Body.Close() //nolint:errcheck // read below
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		s.t.Fatalf("submit: %s: %s", resp.Status, data)
	}
	var out struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.JobID == "" {
		s.t.Fatalf("submit: answer %s: %v", data, err)
	}
	return out.JobID
}

// jobView is what GET /submissions/{id} tells of the job.
type jobView struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
	Total  int    `json:"total"`
	Done   int    `json:"done"`
	Dead   int    `json:"dead"`
}

// waitCompleted waits until the job is completed and returns its view; any
// other final state fails the test.
func (s *system) waitCompleted(ctx context.Context) jobView {
	s.t.Helper()
	for {
		var v jobView
		s.get(ctx, "/submissions/"+s.job, &v)
		switch v.State {
		case "completed":
			return v
		case "failed", "stopped", "terminated", "error":
			s.t.Fatalf("job %s is %s: %s", s.job, v.State, v.Reason)
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("job %s still %s: %v", s.job, v.State, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// get reads a JSON document from the API of any manager that answers.
func (s *system) get(ctx context.Context, path string, v any) {
	s.t.Helper()
	retry(s.t, ctx, "GET "+path, func(ctx context.Context) (struct{}, error) {
		api := s.apis[s.rng.IntN(len(s.apis))]
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+path, nil)
		req.Header.Set("Authorization", "Bearer "+tenantToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return struct{}{}, err
		}
		defer resp.Body.Close() //nolint:errcheck // read below
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return struct{}{}, err
		}
		if resp.StatusCode != http.StatusOK {
			return struct{}{}, fmt.Errorf("%s: %s", resp.Status, data)
		}
		return struct{}{}, json.Unmarshal(data, v)
	})
}

// waitResults waits until the job has at least n results.
func (s *system) waitResults(ctx context.Context, n int) {
	s.t.Helper()
	for {
		got, err := s.storedResults(ctx)
		if err == nil && got >= n {
			return
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("waiting for %d results (have %d, last error %v): %v", n, got, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitResultsOrDrained waits until the job has n results, or until its
// queue has neither waiting nor unacknowledged items while results are
// missing: those items are lost, since a result is stored before its item
// is acknowledged. It reports whether the queue drained short.
func (s *system) waitResultsOrDrained(ctx context.Context, n int) bool {
	s.t.Helper()
	empty := 0 // consecutive checks that found the queue empty
	for {
		if got, err := s.storedResults(ctx); err == nil && got >= n {
			return false
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rec, err := s.c.Jobs().Status(wctx, s.job)
		var ws bus.WorkState
		if err == nil {
			ws, err = s.c.JobWork(wctx, rec)
		}
		cancel()
		if err == nil && ws.Pending == 0 && ws.InFlight == 0 {
			empty++
		} else {
			empty = 0
		}
		if empty == 5 { // a second apart: not a passing state of a restart
			return true
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("waiting for %d results: %v", n, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func (s *system) storedResults(ctx context.Context) (int, error) {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := s.c.JetStream().Stream(ictx, s.c.Prefix().Stream(schemas.StreamResults))
	if err != nil {
		return 0, err
	}
	return int(st.CachedInfo().State.Msgs), nil
}

// leader returns the process holding stage's lease.
func (s *system) leader(ctx context.Context, name string) *Proc {
	s.t.Helper()
	kv := retry(s.t, ctx, "leases bucket", func(ctx context.Context) (jetstream.KeyValue, error) {
		return s.c.JetStream().KeyValue(ctx, s.c.Prefix().Bucket("leases"))
	})
	for {
		e, err := kv.Get(ctx, name)
		if err == nil {
			for _, p := range s.stages[name] {
				if p.Name == string(e.Value()) && p.Running() {
					return p
				}
			}
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("no leader of %s: %v", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// inject kills a process of the fault's kind with SIGKILL and restarts it
// after a random delay of up to 2.5s, in the background.
func (s *system) inject(ctx context.Context, f fault) {
	s.t.Helper()
	delay := time.Duration(300+s.rng.IntN(2200)) * time.Millisecond
	var p *Proc
	var healthy func() error
	switch f {
	case killWorker:
		if s.killGateWorker(ctx) {
			s.count(f, 0)
			return
		}
		p = s.cli
	case killNATS:
		s.natsBusy.Lock() // never two servers down: R3 streams keep a quorum
		i := s.rng.IntN(len(s.nats.Servers))
		p = s.nats.Servers[i]
		healthy = func() error {
			hctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			return s.nats.WaitServerHealthy(hctx, i)
		}
	case killGate:
		p = s.leader(ctx, "gate")
	case killLeader:
		p = s.leader(ctx, []string{"manager", "controller"}[s.rng.IntN(2)])
	case killManager:
		p = s.stages["manager"][s.rng.IntN(len(s.stages["manager"]))]
	case killStage:
		p = s.stages[[]string{"collector", "processor", "actuator"}[s.rng.IntN(3)]][0]
	}
	if !p.Running() { // still down from an earlier fault
		s.t.Logf("%s: %s is down already", f, p.Name)
		return
	}
	s.t.Logf("kill -9 %s (%s, pid %d), restart in %s", p.Name, f, p.Pid(), delay)
	p.Kill()
	s.count(f, 0)
	s.pending.Go(func() {
		time.Sleep(delay)
		if err := p.Start(); err != nil {
			s.t.Error(err)
		}
		s.count("", 1)
		if healthy != nil {
			if err := healthy(); err != nil {
				s.t.Errorf("after restart: %v", err)
			}
			s.natsBusy.Unlock()
		}
	})
}

// killGateWorker kills one of the workers the gate's leader runs; its local
// runtime restarts it. It reports false when the gate runs none right now.
func (s *system) killGateWorker(ctx context.Context) bool {
	s.t.Helper()
	gate := s.leader(ctx, "gate")
	kids := Children(gate.Pid())
	if len(kids) == 0 {
		return false
	}
	pid := kids[s.rng.IntN(len(kids))]
	s.t.Logf("kill -9 worker pid %d of %s; its runtime restarts it", pid, gate.Name)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.t.Fatal(err)
	}
	return true
}

func (s *system) count(f fault, restarts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f != "" {
		s.kills[f]++
	}
	s.restarts += restarts
}

// restartAll kills every process at once, NATS servers included (the
// gate's workers die with it), and starts them all again: the job must
// resume where it was.
func (s *system) restartAll(ctx context.Context) {
	s.t.Helper()
	all := []*Proc{s.cli}
	for _, st := range stages {
		all = append(all, s.stages[st.name]...)
	}
	all = append(all, s.nats.Servers...)
	s.t.Logf("kill -9 the whole system (%d processes and the gate's workers)", len(all))
	for _, p := range all {
		p.Kill()
	}
	s.count(killAll, 0)
	time.Sleep(time.Second)
	for _, p := range s.nats.Servers {
		s.g.Start(p)
	}
	s.waitNATS(ctx)
	for _, p := range all[:len(all)-len(s.nats.Servers)] {
		s.g.Start(p)
	}
	s.count("", len(all))
	s.waitAPIs(ctx, s.apis...)
}

// crashes counts the processes that exited by themselves and were
// restarted by their supervision.
func (s *system) crashes() map[string]int {
	out := map[string]int{}
	all := append([]*Proc{s.cli}, s.nats.Servers...)
	for _, ps := range s.stages {
		all = append(all, ps...)
	}
	for _, p := range all {
		if n := p.Crashes(); n > 0 {
			out[p.Name] = n
		}
	}
	return out
}

// cpu stops every process and returns the processor time used by the NATS
// servers, the stages (with the gate's workers) and the pace worker.
func (s *system) cpu() string {
	var nats, stages time.Duration
	for _, p := range s.nats.Servers {
		p.Kill()
		nats += p.CPU()
	}
	for _, ps := range s.stages {
		for _, p := range ps {
			p.Kill()
			stages += p.CPU()
		}
	}
	s.cli.Kill()
	return fmt.Sprintf("cpu: nats servers %s, stages and their workers %s, pace worker --exec %s",
		nats.Round(time.Second), stages.Round(time.Second), s.cli.CPU().Round(time.Second))
}

// figures are the measured outcome of a run.
type figures struct {
	items, results, duplicates, lost, wrong int
	byCLI                                   int // results of the pace worker --exec
	kills                                   map[fault]int
	restarts                                int
	crashes                                 map[string]int // exits by themselves, by process
	seed                                    uint64
	took                                    time.Duration
}

// count compares the stored results with the submitted payloads (item ids
// are the manager's: 000001, 000002…): an item with no result is lost,
// every result beyond an item's first is a duplicate, and a result whose
// output is not its item's payload is wrong.
func count(job string, payloads []string, results []*schemas.Result) figures {
	f := figures{items: len(payloads), results: len(results)}
	seen := make(map[string]int, len(results))
	for _, r := range results {
		seen[r.ItemID]++
		if r.Worker == "cli" {
			f.byCLI++
		}
		if seen[r.ItemID] > 1 {
			f.duplicates++
		}
		i, err := strconv.Atoi(r.ItemID)
		if r.Job != job || err != nil || i < 1 || i > len(payloads) || r.Output != payloads[i-1] {
			f.wrong++
		}
	}
	for i := range payloads {
		if seen[fmt.Sprintf("%06d", i+1)] == 0 {
			f.lost++
		}
	}
	return f
}

// line is the contract of `task chaos`: its last line.
func (f figures) line() string {
	return fmt.Sprintf("items=%d results=%d duplicates=%d lost=%d", f.items, f.results, f.duplicates, f.lost)
}

func (f figures) detail() string {
	return fmt.Sprintf("kills=%v restarts=%d crashes=%v by_pace_worker_exec=%d wrong=%d took=%s seed=%d", f.kills,
		f.restarts, f.crashes, f.byCLI, f.wrong, f.took.Round(time.Second), f.seed)
}

// chaosItems is the size of the job: PACE_CHAOS_ITEMS, 20,000 by default.
func chaosItems(t *testing.T) int {
	t.Helper()
	s := os.Getenv("PACE_CHAOS_ITEMS")
	if s == "" {
		return defaultItems
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 {
		t.Fatalf("PACE_CHAOS_ITEMS=%q: want an integer >= 100", s)
	}
	return n
}

// chaosSeed is PACE_CHAOS_SEED, or a new seed.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("PACE_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PACE_CHAOS_SEED=%q: want an unsigned integer", s)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// retry calls read until it succeeds: a cluster that has just lost a server
// may answer a request with a time-out or no responders for a while.
func retry[T any](t *testing.T, ctx context.Context, what string, read func(context.Context) (T, error)) T {
	t.Helper()
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := read(rctx)
		cancel()
		if err == nil {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (%v)", what, err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
			t.Logf("%s: %v; retrying", what, err)
		}
	}
}

// workDir returns a directory for the run's stores, configurations and logs,
// removed when the test passes and kept for inspection when it fails.
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pace-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs and stores kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}
