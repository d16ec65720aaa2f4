package integration

import (
	"context"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/schemas"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// TestWorkerSecurityMeetsItsPodSecurityLevel: the pods of a job's Job pass
// the real apiserver's Pod Security admission exactly at the level their
// worker.security asks for. The restricted default passes everywhere; an
// image's own user with a writable root (Asperathos' pods) needs baseline;
// privileged with a host device (SCONE's /dev/isgx) needs privileged.
func TestWorkerSecurityMeetsItsPodSecurityLevel(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	levels := []string{"restricted", "baseline", "privileged"}
	for _, level := range levels {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pss-" + level,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}}}
		if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rt := newKubeRuntime(t, admin, kubeactuator.Config{NATSURL: "nats://pace-nats:4222"}, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		name     string
		security *schemas.WorkerSecurity
		least    int // index in levels of the strictest level that admits the pods
	}{
		{"restricted", nil, 0},
		{"image-user", &schemas.WorkerSecurity{ImageUser: true, WritableRoot: true}, 1},
		{"sgx", &schemas.WorkerSecurity{ImageUser: true, Privileged: true, HostDevices: []string{"/dev/isgx"}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &schemas.JobRecord{ID: "sec-" + tc.name, Spec: schemas.JobSpec{
				Worker:   schemas.WorkerSpec{Image: "registry.example/app:1", Security: tc.security},
				Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: "pss-privileged"}}}
			if _, err := rt.Scale(ctx, rec, 1); err != nil {
				t.Fatal(err)
			}
			j, err := admin.BatchV1().Jobs("pss-privileged").Get(ctx, kubeactuator.Name(rec.ID), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, level := range levels {
				ns := "pss-" + level
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "check", Namespace: ns}, Spec: j.Spec.Template.Spec}
				_, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				if admitted := err == nil; admitted != (i >= tc.least) {
					t.Errorf("pods at level %s: admitted %v (%v), want %v", level, admitted, err, i >= tc.least)
				}
			}
		})
	}
}
