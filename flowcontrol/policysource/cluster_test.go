package policysource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/policysource"
)

// TestClusterUnreachableAtFirst: a cluster that cannot be read within the
// sync timeout is an error naming the cause, and Run returns (its informers
// stopped) rather than hanging. TestProxyFollowsTheClusterPolicy (cmd/pace)
// reads a real kube-apiserver.
func TestClusterUnreachableAtFirst(t *testing.T) {
	kc, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	src := &policysource.Cluster{Client: kc, SyncTimeout: 200 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		done <- src.Run(context.Background(), func(context.Context, policy.Objects) error {
			t.Error("applied objects from an unreachable cluster")
			return nil
		})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not read from the cluster") {
			t.Errorf("Run: %v, want the sync timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its sync timeout")
	}
}
