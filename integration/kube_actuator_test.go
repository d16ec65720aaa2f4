package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/schemas"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

var cp *kubetest.ControlPlane

func TestMain(m *testing.M) {
	bin, err := kubetest.Binaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1) // a missing real component fails the suite, it does not skip it
	}
	dir, err := os.MkdirTemp("", "pace-kube")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if cp, err = kubetest.Start(bin, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := cp.StartNodes(bin); err != nil {
		cp.Stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cp.Stop()
	if code == 0 {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// restricted are the labels of a namespace that enforces the restricted
// Pod Security Standard and warns about it (for Jobs, whose pod templates
// admission only warns about).
var restricted = map[string]string{
	"pod-security.kubernetes.io/enforce": "restricted",
	"pod-security.kubernetes.io/warn":    "restricted",
}

// grantActuator creates ns, enforcing the restricted Pod Security Standard,
// and gives the user the rights the Kubernetes actuator needs in it.
func grantActuator(t *testing.T, admin kubernetes.Interface, ns, user string) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: restricted}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pace-actuator", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale", "statefulsets/scale"}, Verbs: []string{"get", "patch"}},
	}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pace-actuator", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pace-actuator"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// newKubeRuntime returns Pace's Kubernetes runtime, failing the test on a
// bad cfg.
func newKubeRuntime(t *testing.T, cs kubernetes.Interface, cfg kubeactuator.Config, log *slog.Logger) *kubeactuator.Runtime {
	t.Helper()
	rt, err := kubeactuator.New(cs, cfg, kubeactuator.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// warningRecorder keeps the apiserver's Warning headers, among them Pod
// Security violations of a namespace's warn level.
type warningRecorder struct {
	mu   sync.Mutex
	list []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.list)
}

// TestKubernetesActuatorThroughTheGate drives a real kube-apiserver: scale
// decisions pass Pace's APF bus gate, then the actuator creates and patches
// the Job with an RBAC-restricted identity (which the apiserver's own APF
// classifies too), and a terminate deletes it. The namespace enforces the
// restricted Pod Security Standard: the Job draws no warning and its pods
// are admitted and run. They take their NATS credentials from a Secret
// that alice cannot read, by reference: no value of it is in the Job.
func TestKubernetesActuatorThroughTheGate(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	const ns, job, secret, password = "pace-test", "render", "pace-worker-nats", "worker-password-3f9c1e"
	grantActuator(t, admin, ns, kubetest.User)
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret},
		StringData: map[string]string{"user": "pace-worker", "password": password, "ca.crt": "test CA"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	c := bustest.Client(t, bustest.Server(t))
	if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: kubetest.User,
		Worker:   schemas.WorkerSpec{Image: "registry.example/render:1", Command: []string{"pace", "worker", job, "--exec", "render"}},
		Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var admitted []schemas.AdmissionEvent
	sub, err := c.Conn().Subscribe(c.Prefix().Admission("*", "*"), func(m *nats.Msg) {
		if ev, err := bus.Decode[schemas.AdmissionEvent](m.Data, m.Header); err == nil {
			mu.Lock()
			admitted = append(admitted, *ev)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	warns := &warningRecorder{}
	user := rest.CopyConfig(cp.User)
	user.WarningHandler = warns
	rt := newKubeRuntime(t, kubernetes.NewForConfigOrDie(user),
		kubeactuator.Config{NATSURL: "nats://pace-nats:4222", WorkerSecret: secret}, log)
	startActuatorPath(t, c, rt, log)

	parallelism := func() int32 {
		j, err := admin.BatchV1().Jobs(ns).Get(ctx, kubeactuator.Name(job), metav1.GetOptions{})
		if err != nil || j.Spec.Parallelism == nil {
			return -1
		}
		return *j.Spec.Parallelism
	}
	rec, err := c.Jobs().Status(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	running := func() int {
		n, err := rt.Running(ctx, rec)
		if err != nil {
			return -1
		}
		return n
	}
	for i, want := range []int{3, 5, 2} {
		bustest.Publish(t, c, c.Prefix().Decisions(job), &schemas.Decision{Job: job, At: time.Now(), Replicas: want, Reason: "test"})
		bustest.Eventually(t, 20*time.Second, fmt.Sprintf("parallelism %d", want), func() bool { return parallelism() == int32(want) })
		if i == 0 {
			checkWorkerPod(t, admin, ns, job, secret, password)
		}
		// kube-controller-manager creates the pods, the scheduler binds them,
		// kwok runs them: the observed count comes from real pod status.
		bustest.Eventually(t, 30*time.Second, fmt.Sprintf("%d running pods", want), func() bool { return running() == want })
	}
	j, err := admin.BatchV1().Jobs(ns).Get(ctx, kubeactuator.Name(job), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := j.Spec.Template.Spec
	env := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["PACE_JOB"] != job || env["PACE_NATS_URL"] != "nats://pace-nats:4222" || pod.Containers[0].Image != "registry.example/render:1" ||
		j.Labels[kubeactuator.LabelJob] != job || j.Spec.PodFailurePolicy == nil {
		t.Errorf("job spec: env %v, image %s, labels %v, pod failure policy %v", env, pod.Containers[0].Image, j.Labels, j.Spec.PodFailurePolicy)
	}
	for _, w := range warns.all() {
		t.Errorf("warning to the runtime: %s", w)
	}

	bustest.Publish(t, c, c.Prefix().Jobs(job, schemas.EventTerminated),
		&schemas.JobEvent{Job: job, Type: schemas.EventTerminated, State: schemas.Terminated, At: time.Now()})
	bustest.Eventually(t, 30*time.Second, "the Job and its pods deleted", func() bool {
		_, err := admin.BatchV1().Jobs(ns).Get(ctx, kubeactuator.Name(job), metav1.GetOptions{})
		return apierrors.IsNotFound(err) && running() == 0
	})

	mu.Lock()
	for _, ev := range admitted {
		if ev.Outcome != schemas.Dispatched || ev.FlowSchema != "global-default" {
			t.Errorf("admission event %+v, want dispatched by global-default (alice is an ordinary user)", ev)
		}
	}
	if len(admitted) < 4 {
		t.Errorf("%d admission events, want the three scales and the delete", len(admitted))
	}
	mu.Unlock()

	// The apiserver's own APF saw alice's calls in its global-default level.
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "apiserver_flowcontrol_dispatched_requests_total{") &&
			strings.Contains(line, `flow_schema="global-default"`) {
			found = true
		}
	}
	if !found {
		t.Error("the apiserver dispatched no request through its global-default flow schema")
	}
}

// checkWorkerPod checks the pod template of the job's Job: the apiserver
// admits a pod made from it in the restricted namespace ns (a server-side
// dry run, so Pod Security enforces rather than warns) without a warning;
// it takes the NATS user and password from the Secret's keys and mounts
// only its CA, read-only; and no value of the Secret is in the Job.
func checkWorkerPod(t *testing.T, admin kubernetes.Interface, ns, job, secret, password string) {
	t.Helper()
	ctx := context.Background()
	j, err := admin.BatchV1().Jobs(ns).Get(ctx, kubeactuator.Name(job), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warns := &warningRecorder{}
	cfg := rest.CopyConfig(cp.Admin)
	cfg.WarningHandler = warns
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-check", Namespace: ns}, Spec: j.Spec.Template.Spec}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods(ns).Create(ctx, pod,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("a worker pod in a namespace enforcing restricted: %v", err)
	}
	for _, w := range warns.all() {
		t.Errorf("a worker pod in a namespace enforcing restricted: warning: %s", w)
	}

	c := j.Spec.Template.Spec.Containers[0]
	refs := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		} else if e.Name == "PACE_NATS_CA" {
			refs[e.Name] = e.Value
		}
	}
	want := map[string]string{"PACE_NATS_USER": secret + "/user", "PACE_NATS_PASSWORD": secret + "/password",
		"PACE_NATS_CA": kubeactuator.CredentialsDir + "/ca.crt"}
	if !maps.Equal(refs, want) {
		t.Errorf("worker NATS settings %v, want %v", refs, want)
	}
	var mounted []string
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			for _, it := range v.Secret.Items {
				mounted = append(mounted, v.Secret.SecretName+"/"+it.Key+" at "+it.Path)
			}
		}
	}
	if got := strings.Join(mounted, ", "); got != secret+"/ca.crt at ca.crt" {
		t.Errorf("Secret volumes hold %q, want only the CA", got)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == kubeactuator.CredentialsDir && !m.ReadOnly {
			t.Errorf("%s is mounted writable", m.MountPath)
		}
	}
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), password) {
		t.Error("the Job carries the worker password")
	}
}
