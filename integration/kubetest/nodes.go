package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// StartNodes makes pods run: it starts kube-controller-manager (Jobs create
// pods), kube-scheduler and kwok from binDir, and registers one fake node
// that kwok keeps ready. Pods never execute code; kwok marks them Running,
// and serves PodLog as the log of each of their containers, as a kubelet
// would (the apiserver proxies pods/log to kwok's server on loopback).
// Stop stops them too.
func (cp *ControlPlane) StartNodes(binDir string) error {
	if err := cp.startControllers(binDir, "*,-nodeipam,-nodelifecycle"); err != nil {
		return err
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		return err
	}
	cp.PodLog = filepath.Join(cp.Dir, "pods.log")
	if err := os.WriteFile(cp.PodLog, nil, 0o600); err != nil {
		return err
	}
	logs := filepath.Join(cp.Dir, "kwok-logs.yaml")
	if err := os.WriteFile(logs, fmt.Appendf(nil, `apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata: {name: every-container}
spec:
  logs: [{logsFile: %q, follow: true}]
`, cp.PodLog), 0o600); err != nil {
		return err
	}
	port := strconv.Itoa(freePort())
	kwok, err := start(cp.Dir, "kwok.log", filepath.Join(binDir, "kwok"), "--kubeconfig="+kubeconfig,
		"--manage-all-nodes=true", "--config="+filepath.Join(binDir, "kwok-stages.yaml"), "--config="+logs,
		"--cidr=10.244.0.0/16", "--node-ip=127.0.0.1", "--node-port="+port, "--server-address=127.0.0.1:"+port)
	if err != nil {
		return err
	}
	cp.extra = append(cp.extra, kwok)

	cs, err := kubernetes.NewForConfig(cp.Admin)
	if err != nil {
		return err
	}
	ctx := context.Background()
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0", Labels: map[string]string{"type": "kwok"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create fake node: %w", err)
	}
	// Admission taints a new node not-ready; only the (disabled) node
	// lifecycle controller would lift it, as no kubelet reports.
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("untaint fake node: %w", err)
	}
	return nil
}

// startControllers starts kube-controller-manager with controllers (its
// --controllers) and kube-scheduler, without leader election.
func (cp *ControlPlane) startControllers(binDir, controllers string) error {
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		return err
	}
	auth := []string{"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1"}
	kcm, err := start(cp.Dir, "kcm.log", filepath.Join(binDir, "kube-controller-manager"), append(auth,
		"--secure-port="+strconv.Itoa(freePort()), "--service-account-private-key-file="+filepath.Join(cp.Dir, "sa.key"),
		"--root-ca-file="+filepath.Join(cp.Dir, "certs", "apiserver.crt"), "--use-service-account-credentials=false", "--controllers="+controllers)...)
	if err != nil {
		return err
	}
	cp.extra = append(cp.extra, kcm)
	sched, err := start(cp.Dir, "scheduler.log", filepath.Join(binDir, "kube-scheduler"),
		append(auth, "--secure-port="+strconv.Itoa(freePort()))...)
	if err != nil {
		return err
	}
	cp.extra = append(cp.extra, sched)
	return nil
}

// AppendPodLog appends lines to PodLog in the container runtime's format,
// stamped now, as written to stdout.
func (cp *ControlPlane) AppendPodLog(lines ...string) error {
	f, err := os.OpenFile(cp.PodLog, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	for _, l := range lines {
		if _, err := fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), l); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}
