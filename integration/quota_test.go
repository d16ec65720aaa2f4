package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

// TestSubmissionKnowsTheNamespaceQuota submits Kubernetes jobs for a
// registered cluster of a real kube-apiserver whose namespace has a
// ResourceQuota (3 pods, 1 cpu of requests, 1 pod already there): a job
// whose replicas.max the namespace cannot hold is refused on that field,
// naming the quota, before anything is stored; one that fits is accepted.
func TestSubmissionKnowsTheNamespaceQuota(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	const ns = "quota-ns"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "workers"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3"),
			corev1.ResourceRequestsCPU: resource.MustParse("1")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One pod already there, once the quota controller has seen the quota.
	deadline := time.Now().Add(time.Minute)
	for {
		q, err := admin.CoreV1().ResourceQuotas(ns).Get(ctx, "workers", metav1.GetOptions{})
		if err == nil && len(q.Status.Hard) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("quota status never set: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	c := bustest.Client(t, bustest.Server(t))
	registerCluster(t, c, "lab", kubetest.AdminToken, false)
	m, err := manager.New(manager.Deps{Bus: c}, manager.Config{})
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, m.Run)
	submit := func(max int, cpu string) error {
		t.Helper()
		doc, _ := json.Marshal(map[string]any{"mode": "streaming",
			"worker":   map[string]any{"image": "registry.example/w:1", "resources": map[string]any{"requests": map[string]string{"cpu": cpu}}},
			"actuator": map[string]any{"name": "kubernetes", "namespace": ns, "cluster": "lab"},
			"replicas": map[string]any{"min": 0, "max": max, "initial": 0}})
		_, err := m.Submit(ctx, auth.User{Name: "alice"}, doc, "application/json")
		return err
	}
	// Pods: 2 more fit. CPU: 900m left, 4 pods of 200m.
	err = submit(3, "200m")
	var apiErr *schemas.APIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Error(), "spec.replicas.max") ||
		!strings.Contains(apiErr.Error(), "room for 2 more worker pods") || !strings.Contains(apiErr.Error(), "ResourceQuota workers: pods used 1 of 3") {
		t.Errorf("replicas.max 3 in a namespace with room for 2 pods: %v, want a refusal on spec.replicas.max naming the quota", err)
	}
	// CPU binds: 900m left, pods of 400m: 2 fit, not 3... and pods allow 2.
	if err := submit(2, "400m"); err != nil {
		t.Errorf("replicas.max 2 of 400m with room for 2: %v", err)
	}
	err = submit(2, "500m")
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Error(), "room for 1 more worker pods") || !strings.Contains(apiErr.Error(), "requests.cpu") {
		t.Errorf("replicas.max 2 of 500m with 900m left: %v, want a refusal naming requests.cpu", err)
	}
	jobs, err := c.Jobs().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Errorf("%d jobs stored, want the one that fits", len(jobs))
	}
}
