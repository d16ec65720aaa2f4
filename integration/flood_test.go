package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/stages/manager"
)

// floodPolicy is the --flowcontrol-config of the flood test: every tenant
// (group "tenants") in one priority level of 3 seats (10 of the ~300 shares
// of the default levels, of 60 server seats), one flow per user. Fair
// queuing over shuffle-sharded queues, not separate levels, keeps the
// tenants apart; no borrowing keeps the seats fixed.
const floodPolicy = `
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: tenants}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 10
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse:
      type: Queue
      queuing: {queues: 16, handSize: 4, queueLengthLimit: 8}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: tenants}
spec:
  matchingPrecedence: 1000
  priorityLevelConfiguration: {name: tenants}
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: Group, group: {name: tenants}}]
    resourceRules:
    - {apiGroups: [pace.dev], resources: ["*"], verbs: ["*"], clusterScope: true, namespaces: ["*"]}
`

// Flood parameters: tenant A's concurrent clients (more than its 4 queues
// of 8 plus the 3 seats hold), the polite tenants' pace (one request at a
// time, at most one per interval: never more than a flow's fair share), and
// the phases' lengths.
const (
	floodClients   = 48
	politeInterval = 20 * time.Millisecond
	baselineFor    = 4 * time.Second
	floodFor       = 8 * time.Second
)

type tenant struct{ user, token string }

var (
	tenantA = tenant{"tenant-a", "flood-token-a"}
	tenantB = tenant{"tenant-b", "flood-token-b"}
	tenantC = tenant{"tenant-c", "flood-token-c"}
)

// tally is what one tenant saw in one phase.
type tally struct {
	sent, admitted, rejected, failed int
	latency                          []time.Duration // of admitted requests
}

func (t *tally) add(o tally) {
	t.sent, t.admitted, t.rejected, t.failed = t.sent+o.sent, t.admitted+o.admitted, t.rejected+o.rejected, t.failed+o.failed
	t.latency = append(t.latency, o.latency...)
}

// quantile returns the q-quantile of the admitted requests' latency.
func (t *tally) quantile(q float64) time.Duration {
	if len(t.latency) == 0 {
		return 0
	}
	slices.Sort(t.latency)
	return t.latency[min(len(t.latency)-1, int(q*float64(len(t.latency))))]
}

func (t *tally) String() string {
	ms := func(d time.Duration) string {
		if len(t.latency) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("sent=%d admitted=%d rejected_429=%d failed=%d p50=%s p95=%s p99=%s",
		t.sent, t.admitted, t.rejected, t.failed, ms(t.quantile(0.5)), ms(t.quantile(0.95)), ms(t.quantile(0.99)))
}

// floodAPI serves the manager's HTTP API as `pace up` does: bearer tokens
// from a token file, then the APF filter (gate settings cfg) with
// floodPolicy over the defaults, then the routes. It returns the API's URL
// and the tenants' job, one each, submitted through the API.
func floodAPI(t *testing.T, cfg apf.Config) (string, map[tenant]string) {
	t.Helper()
	var tokens strings.Builder
	for _, tn := range []tenant{tenantA, tenantB, tenantC} {
		fmt.Fprintf(&tokens, "%s,%s,%s,\"tenants\"\n", tn.token, tn.user, tn.user)
	}
	tf, err := auth.ParseTokens(strings.NewReader(tokens.String()))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := policy.Load(strings.NewReader(floodPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, cfg, policy.Overlay(policy.Defaults(), objs), nil)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, g.Run)
	for _, lv := range g.Dump() {
		if lv.Name == "tenants" && !cfg.Disabled {
			t.Logf("priority level tenants: %d seats, queues 16, hand 4, queue length 8", lv.CurrentLimit)
		}
	}
	c := bustest.Client(t, bustest.Server(t))
	mgr, err := manager.New(manager.Deps{Bus: c}, manager.Config{}, manager.WithAuthenticator(tf), manager.WithUsers(tf),
		manager.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, mgr.Run)
	mux := http.NewServeMux()
	manager.NewAPI(mgr).Register(mux)
	srv := httptest.NewServer(auth.Middleware(tf)(apfhttp.Middleware(g, apfhttp.Resources(apfhttp.PaceGroup, "submissions"))(mux)))
	t.Cleanup(srv.Close)

	jobs := map[tenant]string{}
	for _, tn := range []tenant{tenantA, tenantB, tenantC} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/submissions", strings.NewReader(
			`{"name":"flood","mode":"streaming","worker":{"exec":"cat"}}`))
		req.Header.Set("Authorization", "Bearer "+tn.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			JobID string `json:"job_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: submit: %s (%v)", tn.user, resp.Status, err)
		}
		jobs[tn] = body.JobID
	}
	return srv.URL, jobs
}

// read fetches the tenant's job once and tallies the answer.
func read(ctx context.Context, cl *http.Client, url string, tn tenant, out *tally) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tn.token)
	start := time.Now()
	resp, err := cl.Do(req)
	if ctx.Err() != nil {
		return // the phase ended during the request: not counted
	}
	out.sent++
	if err != nil {
		out.failed++
		return
	}
	_ = resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		out.admitted++
		out.latency = append(out.latency, time.Since(start))
	case http.StatusTooManyRequests:
		out.rejected++
	default:
		out.failed++
	}
}

// floodRun holds what each tenant saw: B and C alone, then A, B and C
// during the flood.
type floodRun struct{ baseB, baseC, floodA, floodB, floodC tally }

func (r *floodRun) log(t *testing.T) {
	t.Helper()
	t.Logf("baseline %v: B %v", baselineFor, &r.baseB)
	t.Logf("baseline %v: C %v", baselineFor, &r.baseC)
	t.Logf("flood %v: A (%d clients) %v", floodFor, floodClients, &r.floodA)
	t.Logf("flood %v: B %v", floodFor, &r.floodB)
	t.Logf("flood %v: C %v", floodFor, &r.floodC)
	t.Logf("B p99 flood/baseline = %.1f, C p99 flood/baseline = %.1f",
		float64(r.floodB.quantile(0.99))/float64(r.baseB.quantile(0.99)), float64(r.floodC.quantile(0.99))/float64(r.baseC.quantile(0.99)))
}

// flood runs the two phases against an API with gate settings cfg: B and C
// read their jobs one request at a time, at most one per politeInterval,
// alone for baselineFor, then for floodFor while A's floodClients read
// with no pause.
func flood(t *testing.T, cfg apf.Config) *floodRun {
	t.Helper()
	base, jobs := floodAPI(t, cfg)
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: floodClients + 8}}
	t.Cleanup(cl.CloseIdleConnections)
	url := func(tn tenant) string { return base + "/submissions/" + jobs[tn] }

	polite := func(ctx context.Context, tn tenant, out *tally) {
		tick := time.NewTicker(politeInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				read(ctx, cl, url(tn), tn, out)
			}
		}
	}
	phase := func(d time.Duration, b, c *tally) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var wg sync.WaitGroup
		wg.Go(func() { polite(ctx, tenantB, b) })
		wg.Go(func() { polite(ctx, tenantC, c) })
		wg.Wait()
	}

	r := &floodRun{}
	phase(baselineFor, &r.baseB, &r.baseC)

	floodCtx, stopFlood := context.WithCancel(context.Background())
	var rejectedA atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex // guards r.floodA
	for range floodClients {
		wg.Go(func() {
			var mine tally
			for floodCtx.Err() == nil {
				before := mine.rejected
				read(floodCtx, cl, url(tenantA), tenantA, &mine)
				if mine.rejected > before {
					rejectedA.Add(1)
				}
			}
			mu.Lock()
			r.floodA.add(mine)
			mu.Unlock()
		})
	}
	t.Cleanup(func() { stopFlood(); wg.Wait() }) // should the test fail before the flood ends
	bustest.Eventually(t, 30*time.Second, "tenant A's first 429: the flood fills its share", func() bool { return rejectedA.Load() > 0 })
	phase(floodFor, &r.floodB, &r.floodC)
	stopFlood()
	wg.Wait()
	r.log(t)
	return r
}

// TestAPFFloodKeepsOtherTenantsLatency has tenant A flood status reads of
// its job with 48 clients and no pause while tenants B and C read theirs one
// request at a time, at most 50/s each, all through the manager's HTTP API
// behind the APF filter, in one priority level of 3 seats with a flow per
// user. B and C run alone first (the baseline), then beside the flood. A
// must be rejected (429) many times, B and C never, and B's and C's median
// latency during the flood must stay below A's: A waits in its own queues,
// B and C do not. The same flood against the plain max-inflight limit
// (APF disabled, 3 reads at once) rejects B and C too. The latency figures
// are logged, not asserted (docs/reliability.md).
func TestAPFFloodKeepsOtherTenantsLatency(t *testing.T) {
	t.Run("fair queuing", func(t *testing.T) {
		r := flood(t, apf.Config{MaxRequestsInflight: 40, MaxMutatingRequestsInflight: 20})
		for name, tl := range map[string]*tally{"baseline B": &r.baseB, "baseline C": &r.baseC, "flood B": &r.floodB, "flood C": &r.floodC} {
			if tl.admitted == 0 || tl.rejected != 0 || tl.failed != 0 {
				t.Errorf("%s: %v, want every request admitted", name, tl)
			}
		}
		if r.floodA.failed != 0 || r.floodA.rejected < r.floodA.sent/10 {
			t.Errorf("flood A: %v, want many 429s (at least a tenth) and no other failure", &r.floodA)
		}
		for name, tl := range map[string]*tally{"B": &r.floodB, "C": &r.floodC} {
			if tl.quantile(0.5) >= r.floodA.quantile(0.5) {
				t.Errorf("flood: %s's median latency %v is not below flooding A's %v: A's queueing reaches %s",
					name, tl.quantile(0.5), r.floodA.quantile(0.5), name)
			}
		}
	})
	t.Run("max-inflight only", func(t *testing.T) {
		r := flood(t, apf.Config{Disabled: true, MaxRequestsInflight: 3, MaxMutatingRequestsInflight: 1})
		if r.floodB.rejected+r.floodC.rejected == 0 {
			t.Errorf("flood B: %v, C: %v, want 429s for them too without fair queuing", &r.floodB, &r.floodC)
		}
	})
}
