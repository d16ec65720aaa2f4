package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/integration/faultproxy"
	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator"
	"github.com/pace-platform/pace/stages/gate"
	"github.com/pace-platform/pace/stages/gate/targets"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// startActuatorPath runs what `pace up` runs between decisions and a
// runtime: the actuator stage, the APF bus gate with the default policy,
// and an executor with rt as the kubernetes runtime.
func startActuatorPath(t *testing.T, c *bus.Client, rt targets.Runtime, log *slog.Logger) {
	t.Helper()
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), policy.Defaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, g.Run)
	exec := targets.NewExecutor(c, map[string]targets.Runtime{schemas.KubernetesActuator: rt}, targets.WithLogger(log))
	gs, err := gate.New(gate.Deps{Bus: c, Gate: g, Actuator: exec}, gate.Config{}, gate.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, gs.Run)
	act, err := actuator.New(actuator.Deps{Bus: c}, actuator.Config{}, actuator.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, act.Run)
}

// defaultFaultSeed makes the proxy's first 24 draws (the fewest writes the
// test makes: per job a patch and a create, five patches, a delete) hold
// every kind of fault, 8 in all; the test checks that each kind occurred.
const defaultFaultSeed = 128

// faultSeed seeds the proxy's faults; PACE_FAULT_SEED replays another mix.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv("PACE_FAULT_SEED")
	if s == "" {
		return defaultFaultSeed
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("PACE_FAULT_SEED=%q: want an unsigned integer", s)
	}
	return seed
}

// retriesInReason reads the retry count the executor puts in an outcome's
// reason ("3 retries (conflict 1, server error 2)").
var retriesInReason = regexp.MustCompile(`(\d+) retr(y|ies) \(`)

// TestKubernetesActuatorConvergesThroughFaults drives three jobs through
// scale decisions 3 → 7 → 2 → 5 → 8 → 2 and a terminate while a proxy in
// front of the real kube-apiserver breaks 30% of the actuator's writes:
// 429 and 503 with Retry-After, 409, 500, resets, hangs and lost responses
// (the write is applied, the answer never arrives). Every step must
// converge to the decided parallelism on one Job per job (same UID
// throughout, never re-created), the terminate must leave no Job and no
// pods, every request must get an applied outcome, and the outcomes must
// report at least one retry per fault the runtime saw.
func TestKubernetesActuatorConvergesThroughFaults(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	const ns = "pace-faults"
	grantActuator(t, admin, ns, kubetest.User)

	seed := faultSeed(t)
	ca := x509.NewCertPool()
	ca.AppendCertsFromPEM(cp.CA)
	writes := []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	proxy, err := faultproxy.Start(cp.URL, &tls.Config{RootCAs: ca, MinVersion: tls.VersionTLS12}, seed,
		faultproxy.Rule{Fault: faultproxy.TooManyRequests, Methods: writes, Probability: 0.05},
		faultproxy.Rule{Fault: faultproxy.Unavailable, Methods: writes, Probability: 0.03},
		faultproxy.Rule{Fault: faultproxy.Conflict, Methods: writes, Probability: 0.05},
		faultproxy.Rule{Fault: faultproxy.InternalError, Methods: writes, Probability: 0.05},
		faultproxy.Rule{Fault: faultproxy.Reset, Methods: writes, Probability: 0.04},
		faultproxy.Rule{Fault: faultproxy.Hang, Methods: writes, Probability: 0.03},
		faultproxy.Rule{Fault: faultproxy.LostResponse, Methods: writes, Probability: 0.05},
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cfg := rest.CopyConfig(cp.User)
	cfg.Host, cfg.TLSClientConfig = proxy.URL, rest.TLSClientConfig{} // the proxy speaks TLS to the apiserver
	cfg.Timeout = 2 * time.Second                                     // how long a hang lasts

	c := bustest.Client(t, bustest.Server(t))
	jobs := []string{"fault-a", "fault-b", "fault-c"}
	for _, job := range jobs {
		if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: kubetest.User,
			Worker:   schemas.WorkerSpec{Image: "registry.example/render:1", Command: []string{"render"}},
			Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	requests, outcomes := map[string]string{}, map[string]*schemas.KubeOutcome{} // by request ID; guarded by mu
	watch := func(subject string, record func(m *nats.Msg)) {
		sub, err := c.Conn().Subscribe(subject, func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			record(m)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	watch(c.Prefix().KubeRequests(), func(m *nats.Msg) {
		if req, err := bus.Decode[schemas.KubeRequest](m.Data, m.Header); err == nil {
			requests[req.ID] = fmt.Sprintf("%s %s replicas=%d", req.Job, req.Verb, req.Replicas)
		}
	})
	watch(c.Prefix().KubeOutcomes(), func(m *nats.Msg) {
		if out, err := bus.Decode[schemas.KubeOutcome](m.Data, m.Header); err == nil {
			outcomes[out.RequestID] = out
		}
	})

	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	startActuatorPath(t, c, newKubeRuntime(t, kubernetes.NewForConfigOrDie(cfg), kubeactuator.Config{NATSURL: "nats://pace-nats:4222"}, log), log)

	uids := map[string]types.UID{} // each job's Job, from its creation on
	converged := func(job string, want int32) error {
		list, err := admin.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: kubeactuator.LabelJob + "=" + job})
		switch {
		case err != nil:
			return err
		case len(list.Items) > 1:
			t.Fatalf("job %s has %d Kubernetes Jobs, want one", job, len(list.Items))
		case len(list.Items) == 0:
			return fmt.Errorf("job %s: no Job yet", job)
		}
		j := list.Items[0]
		if uid, seen := uids[job]; seen && uid != j.UID {
			t.Fatalf("job %s: its Job was re-created (uid %s, then %s)", job, uid, j.UID)
		}
		uids[job] = j.UID
		if j.Spec.Parallelism == nil || *j.Spec.Parallelism != want {
			return fmt.Errorf("job %s: parallelism %v, want %d", job, j.Spec.Parallelism, want)
		}
		return nil
	}
	start := time.Now()
	for _, want := range []int32{3, 7, 2, 5, 8, 2} {
		for _, job := range jobs {
			bustest.Publish(t, c, c.Prefix().Decisions(job), &schemas.Decision{Job: job, At: time.Now(), Replicas: int(want), Reason: "fault test"})
		}
		for _, job := range jobs {
			bustest.Eventually(t, 30*time.Second, fmt.Sprintf("%s at parallelism %d", job, want), func() bool { return converged(job, want) == nil })
		}
	}
	for _, job := range jobs {
		bustest.Eventually(t, 30*time.Second, job+": two running pods", func() bool { return len(pods(t, admin, ns, job, true)) == 2 })
		if rec, err := c.Jobs().Status(ctx, job); err != nil || rec.Replicas != 2 {
			t.Errorf("job %s record: %+v (%v), want replicas 2", job, rec, err)
		}
		bustest.Publish(t, c, c.Prefix().Jobs(job, schemas.EventTerminated),
			&schemas.JobEvent{Job: job, Type: schemas.EventTerminated, State: schemas.Terminated, At: time.Now()})
	}
	for _, job := range jobs {
		bustest.Eventually(t, 30*time.Second, job+": Job and pods deleted", func() bool {
			_, err := admin.BatchV1().Jobs(ns).Get(ctx, kubeactuator.Name(job), metav1.GetOptions{})
			return apierrors.IsNotFound(err) && len(pods(t, admin, ns, job, false)) == 0
		})
	}
	bustest.Eventually(t, 30*time.Second, "an outcome for every request", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range requests {
			if outcomes[id] == nil {
				return false
			}
		}
		return len(requests) > 0
	})
	elapsed := time.Since(start)
	for _, job := range jobs { // a late retry must not bring a Job back
		if _, err := admin.BatchV1().Jobs(ns).Get(ctx, kubeactuator.Name(job), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("job %s: its Job exists after the terminate (%v)", job, err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	statuses, retried, retries := map[schemas.OutcomeStatus]int{}, 0, 0
	for id, out := range outcomes {
		statuses[out.Status]++
		if out.Status == schemas.Failure {
			t.Errorf("request %s (%s) failed: %s", id, requests[id], out.Reason)
		}
		if m := retriesInReason.FindStringSubmatch(out.Reason); m != nil {
			n, _ := strconv.Atoi(m[1])
			retried, retries = retried+1, retries+n
			t.Logf("outcome of %s: %s, %s", requests[id], out.Status, out.Reason)
		}
	}
	counts := proxy.Counts()
	// 429 and 503 carry Retry-After, which client-go waits out itself; the
	// runtime sees the others.
	seen := counts[faultproxy.Conflict] + counts[faultproxy.InternalError] + counts[faultproxy.Reset] +
		counts[faultproxy.Hang] + counts[faultproxy.LostResponse]
	var mix []string
	total := 0
	for _, f := range faultproxy.Faults {
		mix = append(mix, fmt.Sprintf("%s=%d", f, counts[f]))
		total += counts[f]
		if counts[f] == 0 && seed == defaultFaultSeed {
			t.Errorf("no %s fault injected; the default seed should draw every kind", f)
		}
	}
	calls, byMethod := 0, proxy.Requests()
	for _, m := range writes {
		calls += byMethod[m]
	}
	t.Logf("seed=%d writes=%d faults=%d (%s) requests=%d outcomes=%v retries_reported=%d in %d outcomes, seen_by_runtime=%d elapsed=%v",
		seed, calls, total, strings.Join(mix, " "), len(requests), statuses, retries, retried, seen, elapsed.Round(100*time.Millisecond))
	if seen == 0 {
		t.Errorf("no fault reached the runtime in %d writes: the test exercised nothing", calls)
	}
	if retries < seen {
		t.Errorf("outcomes report %d retries, want at least the %d faults the runtime saw", retries, seen)
	}
}

// pods lists the pods of job in ns: only running ones (not being deleted)
// when running is set.
func pods(t *testing.T, cs kubernetes.Interface, ns, job string, running bool) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kubeactuator.LabelJob + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	if !running {
		return list.Items
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// testWriter sends a logger's lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
