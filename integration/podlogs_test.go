package integration

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// TestPodLogsReachTheJobLog follows a worker pod's log, served by kwok
// through the real apiserver's pods/log with the actuator's RBAC identity,
// into the job's log stream: each line once, tagged with the pod. Lines
// written before the watch started are not repeated, nor are those a
// stopped watch delivered when a new one (a gate that restarts) follows the
// pod again.
func TestPodLogsReachTheJobLog(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	const ns, job = "pod-logs", "chatty"
	grantActuator(t, admin, ns, kubetest.User)
	c := bustest.Client(t, bustest.Server(t))
	spec := schemas.JobSpec{Mode: schemas.Streaming, Owner: kubetest.User,
		Worker:   schemas.WorkerSpec{Image: "registry.example/chatty:1", Command: []string{"pace", "worker", job, "--exec", "chatty"}},
		Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: ns}}.WithDefaults()
	rec, err := c.Jobs().Update(ctx, job, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
		return &schemas.JobRecord{ID: job, Spec: spec, State: schemas.Ongoing, CreatedAt: time.Now()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rt := newKubeRuntime(t, kubernetes.NewForConfigOrDie(cp.User), kubeactuator.Config{NATSURL: "nats://pace-nats:4222"}, log)
	if _, err := rt.Scale(ctx, rec, 1); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "the job's pod running", func() bool {
		n, err := rt.Running(ctx, rec)
		return err == nil && n == 1
	})
	t.Cleanup(func() { _ = rt.Terminate(context.Background(), rec) })

	if err := cp.AppendPodLog("written before the watch"); err != nil {
		t.Fatal(err)
	}
	output := targets.NewWorkerLog(c, targets.WithLogger(log))
	bustest.Run(t, output.Run)
	watch := func() (stop func()) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		w := rt.Watch(&failures{Jobs: kubeactuator.OnBus(c), failed: map[string]string{}}, output, 200*time.Millisecond, clock.RealClock{})
		go func() { done <- w.Run(wctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	stop := watch()
	if err := cp.AppendPodLog("starting", "item 000001 done"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // several checks
	stop()
	stop = watch()
	defer stop()
	time.Sleep(time.Second)
	if err := cp.AppendPodLog("item 000002 done"); err != nil {
		t.Fatal(err)
	}

	want := []string{"starting", "item 000001 done", "item 000002 done"}
	var got []string
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for l, err := range c.Outputs().Logs(lctx, job, true) {
		if err != nil {
			t.Fatalf("job log after %q: %v", got, err)
		}
		if !strings.HasPrefix(l.Source, kubeactuator.Name(job)+"-") {
			t.Errorf("line %q from %q, want the pod of Job %s", l.Line, l.Source, kubeactuator.Name(job))
		}
		got = append(got, l.Line)
		if len(got) == len(want) {
			break
		}
	}
	time.Sleep(time.Second) // more checks, which must repeat nothing
	all := c.Outputs().Logs(ctx, job, false)
	got = got[:0]
	for l, err := range all {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l.Line)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("job log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
