package integration

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/schemas"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// TestDeploymentTargetScaledThroughTheGate: a job whose workers are a
// Deployment the user runs has it scaled 1 → 4 → 2 through Pace's APF gate,
// by an identity that may only patch its scale subresource, and scaled to
// nothing, not deleted, when the job is terminated.
func TestDeploymentTargetScaledThroughTheGate(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	const ns, job = "pace-target", "serve"
	grantActuator(t, admin, ns, kubetest.User)
	labels := map[string]string{"app": "web"}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}}}}}
	if _, err := admin.AppsV1().Deployments(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := bustest.Client(t, bustest.Server(t))
	if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: kubetest.User,
		Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: ns,
			Target: &schemas.ScaleTarget{Kind: "Deployment", Name: "web"}}}); err != nil {
		t.Fatal(err)
	}
	rt := newKubeRuntime(t, kubernetes.NewForConfigOrDie(cp.User), kubeactuator.Config{NATSURL: "nats://pace-nats:4222"}, log)
	startActuatorPath(t, c, rt, log)
	replicas := func() int32 {
		d, err := admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Deployment: %v", err)
		}
		return *d.Spec.Replicas
	}
	for _, want := range []int{4, 2} {
		bustest.Publish(t, c, c.Prefix().Decisions(job), &schemas.Decision{Job: job, At: time.Now(), Replicas: want, Reason: "test"})
		bustest.Eventually(t, 20*time.Second, fmt.Sprintf("web at %d replicas", want), func() bool { return replicas() == int32(want) })
	}
	bustest.Publish(t, c, c.Prefix().Jobs(job, schemas.EventTerminated),
		&schemas.JobEvent{Job: job, Type: schemas.EventTerminated, State: schemas.Terminated, At: time.Now()})
	bustest.Eventually(t, 20*time.Second, "web scaled to 0 and kept", func() bool { return replicas() == 0 })
}
