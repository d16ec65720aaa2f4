// Command pace-node starts a one-node Kubernetes cluster on this machine for
// trying Pace's Kubernetes path without a cloud (task node; docs/deploy.md):
// etcd, kube-apiserver, controller-manager and scheduler on loopback, and a
// real node (containerd, runc, a kubelet, one bridge network) with Pace's
// worker images imported. It prints the kubeconfig and a pace up command
// line whose workers run as pods, and tears everything down on Ctrl-C,
// restoring the host. It needs root and what integration/scripts/test-setup.sh installs.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pace-platform/pace/integration/kubetest"
)

func main() {
	os.Exit(run())
}

func run() int {
	dir := flag.String("dir", filepath.Join(os.TempDir(), "pace-cluster"), "directory of the control plane's state, kubeconfig and the built pace binary")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.RemoveAll(*dir); err != nil {
		log.Error("clean the state directory", "err", err)
		return 1
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		log.Error("state directory", "err", err)
		return 1
	}
	bin, err := kubetest.Binaries()
	if err != nil {
		log.Error("kube binaries", "err", err)
		return 1
	}
	t0 := time.Now()
	cp, err := kubetest.Start(bin, *dir)
	if err != nil {
		log.Error("control plane", "err", err)
		return 1
	}
	defer cp.Stop()
	node, err := cp.StartRealNode(bin, log)
	if err != nil {
		log.Error("node", "err", err)
		return 1
	}
	defer func() {
		t := time.Now()
		node.Stop()
		log.Info("node stopped, host restored", "took", time.Since(t).Round(time.Millisecond))
	}()
	log.Info("node ready", "took", time.Since(t0).Round(time.Millisecond), "node", node.Ready.Round(time.Millisecond))
	t1 := time.Now()
	paceBin, err := node.ImportWorkerImages(*dir)
	if err != nil {
		log.Error("worker images", "err", err)
		return 1
	}
	log.Info("worker images built and imported", "took", time.Since(t1).Round(time.Millisecond))
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		log.Error("kubeconfig", "err", err)
		return 1
	}
	gw := kubetest.Gateway
	fmt.Printf(`Kubernetes: %s (kubeconfig %s), node %s
Images: %s (pace and busybox), %s
Pace, its workers in pods (a token file is needed: NATS listens beyond loopback):
  %s up --token-file TOKENS --kubernetes --kubeconfig %s \
    --nats-listen %s:4222 --redis-listen %s:6380 --pod-nats-url nats://%s:4222 --pod-redis-addr %s:6380
Ctrl-C stops the cluster and restores the host.
`, cp.URL, kubeconfig, kubetest.NodeName, kubetest.PaceImage, kubetest.RedisWorkerImage, paceBin, kubeconfig, gw, gw, gw, gw)
	<-ctx.Done()
	return 0
}
