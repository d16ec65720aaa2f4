package integration

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// failures records the jobs the pod watch fails, reading real records.
type failures struct {
	kubeactuator.Jobs
	mu     sync.Mutex
	failed map[string]string // job → reason
}

func (f *failures) Fail(_ context.Context, job, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed[job] = reason
	return nil
}

func (f *failures) reason(job string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed[job]
}

// TestStuckPodsFailTheirJob applies the failure policy's pods rule on a real
// kube-apiserver: a job whose only pod cannot pull its image is failed once
// the grace has passed, naming the cause and its workers' last lines; a job with one running pod beside
// a stuck one, and a job with the rule off, are left alone; a job whose
// Kubernetes Job has failed is failed at once. The running pod counts as
// its job's replica (worker presence) though no worker announced it.
func TestStuckPodsFailTheirJob(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	const ns = "pods-rule"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := bustest.Client(t, bustest.Server(t))
	jobs := &failures{Jobs: kubeactuator.OnBus(c), failed: map[string]string{}}
	record := func(id string, disable ...string) {
		t.Helper()
		spec := schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice",
			Worker:   schemas.WorkerSpec{Image: "registry.invalid/worker:1"},
			Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: ns},
			Failure:  schemas.FailurePolicy{Disable: disable}}.WithDefaults()
		if _, err := c.Jobs().Update(ctx, id, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
			return &schemas.JobRecord{ID: id, Spec: spec, State: schemas.Ongoing, CreatedAt: time.Now()}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// pod makes a pod of job that no node runs, in the state waiting says
	// ("" for a pod that is fine so far).
	pod := func(job, name, waiting string) {
		t.Helper()
		p, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kubeactuator.LabelJob: job}},
			Spec: corev1.PodSpec{NodeName: "no-such-node",
				Containers: []corev1.Container{{Name: "worker", Image: "registry.invalid/worker:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		phase, state := corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		if waiting != "" {
			phase, state = corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting,
				Message: `Back-off pulling image "registry.invalid/worker:1"`}}
		}
		p.Status = corev1.PodStatus{Phase: phase,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", Image: "registry.invalid/worker:1", State: state}}}
		if _, err := admin.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	record("broken")
	pod("broken", "broken-1", "ImagePullBackOff")
	record("partly")
	pod("partly", "partly-1", "ErrImagePull")
	pod("partly", "partly-2", "")
	record("off", schemas.RulePods)
	pod("off", "off-1", "CrashLoopBackOff")

	rt := newKubeRuntime(t, admin, kubeactuator.Config{NATSURL: "nats://pace-nats:4222"}, slog.New(slog.DiscardHandler))
	clk := clocktesting.NewFakePassiveClock(time.Now())
	output := targets.NewWorkerLog(c)
	output.Line("broken", "broken-0", "worker: cannot reach the queue")
	w := rt.Watch(jobs, output, time.Second, clk)
	t.Cleanup(w.Stop)
	check := func() {
		t.Helper()
		if err := w.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check()
	clk.SetTime(clk.Now().Add(schemas.DefaultPods - time.Second))
	check()
	if r := jobs.reason("broken"); r != "" {
		t.Fatalf("broken failed within its grace: %s", r)
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	check()
	if r := jobs.reason("broken"); !strings.Contains(r, "failure policy pods") || !strings.Contains(r, "ImagePullBackOff") ||
		!strings.Contains(r, "registry.invalid/worker:1") || !strings.Contains(r, "last lines: worker: cannot reach the queue") {
		t.Errorf("broken: reason %q, want the pods rule naming ImagePullBackOff, the image and the workers' last line", r)
	}
	for _, job := range []string{"partly", "off"} {
		if r := jobs.reason(job); r != "" {
			t.Errorf("%s failed: %s", job, r)
		}
	}
	// The running pod is a replica of its job, its worker started or not;
	// pods stuck before running are not.
	presence := c.Workers().Presence(nil)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = presence.Run(pctx) }()
	bustest.Eventually(t, 10*time.Second, "partly's running pod counted as a replica", func() bool { return presence.Count("partly") == 1 })
	if n := presence.Count("broken"); n != 0 {
		t.Errorf("broken, whose only pod cannot pull its image, counts %d replicas", n)
	}

	// A failed Kubernetes Job fails its job at once. Its status is written
	// here, so the Job names another controller (managedBy) and is
	// suspended: the Job controller leaves it alone.
	record("jobfailed")
	kj, err := admin.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: kubeactuator.Name("jobfailed")},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), ManagedBy: ptr.To("example.com/test"), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "worker", Image: "registry.invalid/worker:1"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	kj.Status = batchv1.JobStatus{StartTime: &now, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
	}}
	if _, err := admin.BatchV1().Jobs(ns).UpdateStatus(ctx, kj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	check()
	if r := jobs.reason("jobfailed"); !strings.Contains(r, "BackoffLimitExceeded") {
		t.Errorf("jobfailed: reason %q, want its Job's BackoffLimitExceeded at once", r)
	}
}
