package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/integration/kubetest"
)

// TestProxyMetricsByRBAC: with --authorization-kubeconfig (the proxy
// running as the service account of the documented RBAC), the cluster's
// RBAC decides who reads the proxy's /metrics and APF dumps: alice is
// refused until a ClusterRoleBinding grants her the /metrics URL, and again
// once it is deleted; the dumps stay refused to her; anonymous callers are
// refused; the cluster's admin (system:masters) reads both.
func TestProxyMetricsByRBAC(t *testing.T) {
	t.Parallel()
	cp, upstreamCA := startKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(cp.Admin)
	proxyKubeconfig, _ := proxyIdentity(ctx, t, cp, kc)
	url := runProxy(t, "--upstream", cp.URL, "--upstream-ca", upstreamCA, "--token-file", filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-kubeconfig", proxyKubeconfig,
		"--authorization-webhook-cache-authorized-ttl", "1s", "--authorization-webhook-cache-unauthorized-ttl", "1s")
	get := func(token, path string) error {
		c := kubernetes.NewForConfigOrDie(&rest.Config{Host: url, BearerToken: token})
		return c.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).Error()
	}
	dump := apfhttp.DebugPrefix + "dump_priority_levels"
	forbidden := func(token, path string) (bool, string) {
		err := get(token, path)
		return apierrors.IsForbidden(err), errString(err)
	}
	allowed := func(token, path string) (bool, string) {
		err := get(token, path)
		return err == nil, errString(err)
	}

	for _, path := range []string{"/metrics", dump} {
		if err := get(kubetest.AdminToken, path); err != nil {
			t.Errorf("admin %s: %v", path, err)
		}
		if err := get("", path); !apierrors.IsForbidden(err) {
			t.Errorf("anonymous %s: %v, want forbidden", path, err)
		}
	}
	if err := get(kubetest.UserToken, "/metrics"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "alice" cannot get path "/metrics"`) {
		t.Errorf("alice before the binding: %v, want forbidden naming her", err)
	}

	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "proxy-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-reads-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "proxy-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: kubetest.User}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "alice allowed /metrics by the binding", func() (bool, string) { return allowed(kubetest.UserToken, "/metrics") })
	if ok, err := forbidden(kubetest.UserToken, dump); !ok {
		t.Errorf("alice's dump with /metrics bound: %s, want forbidden", err)
	}
	if err := kc.RbacV1().ClusterRoleBindings().Delete(ctx, "alice-reads-metrics", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "alice refused once the binding is gone", func() (bool, string) { return forbidden(kubetest.UserToken, "/metrics") })
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
