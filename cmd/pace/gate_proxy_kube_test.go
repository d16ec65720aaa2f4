package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/integration/kubetest"
)

// TestProxyKubeAPIServer puts pace gate proxy in front of a real
// kube-apiserver over TLS (--upstream-ca) and checks the seats it charges
// with what it can know: a cluster-wide list of configmaps teaches it their
// count and average size, so the next list costs
// ceil(count × average JSON size / 100,000) seats as kube's size-based
// estimator computes; an update of a configmap watched by 12 watches through
// the proxy costs ceil(12/10) = 2 seats (one initial, two final).
func TestProxyKubeAPIServer(t *testing.T) {
	t.Parallel()
	cp, ca := startKube(t)
	// kube-apiserver's own token file: the proxy classifies the callers the
	// upstream authenticates again from the passed-through token.
	url := runProxy(t, "--upstream", cp.URL, "--upstream-ca", ca, "--token-file", filepath.Join(cp.Dir, "tokens.csv"))
	cfg := &rest.Config{Host: url, BearerToken: kubetest.AdminToken, QPS: 200, Burst: 400}
	kc := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for i := range 60 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)},
			Data: map[string]string{"blob": strings.Repeat("x", 20_000)}}
		if _, err := kc.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	listPath := "/api/v1/configmaps"
	raw, err := kc.CoreV1().RESTClient().Get().AbsPath(listPath).DoRaw(ctx) // the first list: teaches the proxy
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	var size int
	for _, it := range list.Items {
		size += len(it)
	}
	n := len(list.Items)
	// A list without resourceVersion is a consistent read, served from
	// kube-apiserver's watch cache: at most 1 MB of it is charged.
	want := math.Ceil(min(float64(n*(size/n)), 1_000_000) / 100_000)
	proxySeats := seatsCharged(t, url, kubetest.AdminToken)
	if _, err := kc.CoreV1().RESTClient().Get().AbsPath(listPath).DoRaw(ctx); err != nil {
		t.Fatal(err)
	}
	got := seatsCharged(t, url, kubetest.AdminToken) - proxySeats - 1 // minus the scrape of its own /metrics
	if n < 60 || got != want {
		t.Errorf("list of %d configmaps (%d bytes) charged %v seats, want %v", n, size, got, want)
	}
	// kube-apiserver prices the same list from its own storage stats; logged
	// for comparison (it may not have counted the new objects yet).
	before := seatsCharged(t, cp.URL, kubetest.AdminToken)
	if _, err := kubernetes.NewForConfigOrDie(cp.Admin).CoreV1().RESTClient().Get().AbsPath(listPath).DoRaw(ctx); err != nil {
		t.Fatal(err)
	}
	kubeSeats := seatsCharged(t, cp.URL, kubetest.AdminToken) - before - 1 // minus the scrape of its own /metrics
	t.Logf("%d configmaps of %d JSON bytes on average: the proxy charges %v seats for the list, kube-apiserver %v (its storage count of configmaps: %v)",
		n, size/n, got, kubeSeats, metricSum(t, cp.URL, kubetest.AdminToken, "apiserver_resource_objects", `resource="configmaps"`))

	var watches []watch.Interface
	for range 12 {
		w, err := kc.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watches = append(watches, w)
	}
	before = seatsCharged(t, url, kubetest.AdminToken)
	if _, err := kc.CoreV1().ConfigMaps("default").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-00"},
		Data: map[string]string{"blob": "small"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := seatsCharged(t, url, kubetest.AdminToken) - before - 1; got != 2 {
		t.Errorf("update watched 12 times charged %v seats, want 2", got)
	}
	// The watch streams through the proxy: the update reaches it while the
	// response goes on.
	for seen := false; !seen; {
		select {
		case ev := <-watches[0].ResultChan():
			cm, _ := ev.Object.(*corev1.ConfigMap)
			seen = ev.Type == watch.Modified && cm != nil && cm.Name == "cm-00"
		case <-time.After(apftest.Patience):
			t.Fatal("the update never reached a watch through the proxy")
		}
	}

	// The client sees one classification, the proxy's, though
	// kube-apiserver classified the relayed request too.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(url + "/api/v1/namespaces/default/configmaps/cm-00")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	for _, h := range []string{apfhttp.HeaderFlowSchemaUID, apfhttp.HeaderPriorityLevelUID} {
		if v := resp.Header.Values(h); len(v) != 1 {
			t.Errorf("%s: %q, want the proxy's one value", h, v)
		}
	}
}

// startKube starts a real etcd and kube-apiserver (with apiserverFlags) for
// the test and writes the CA of its serving certificate into a file, the
// --upstream-ca of a proxy in front of it.
func startKube(t *testing.T, apiserverFlags ...string) (*kubetest.ControlPlane, string) {
	t.Helper()
	bin, err := kubetest.Binaries()
	if err != nil {
		t.Fatal(err) // a missing real component fails the test
	}
	cp, err := kubetest.Start(bin, t.TempDir(), apiserverFlags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, cp.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	return cp, ca
}

// proxyIdentity applies examples/flowcontrol/gate-proxy-rbac.yaml and
// returns a kubeconfig file and a token file of its service account.
func proxyIdentity(ctx context.Context, t *testing.T, cp *kubetest.ControlPlane, kc kubernetes.Interface) (string, string) {
	t.Helper()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pace"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../examples/flowcontrol/gate-proxy-rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	var (
		sa      corev1.ServiceAccount
		role    rbacv1.ClusterRole
		binding rbacv1.ClusterRoleBinding
	)
	if len(docs) != 3 {
		t.Fatalf("%d documents, want the service account, its role and the binding", len(docs))
	}
	for i, obj := range []any{&sa, &role, &binding} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), obj); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kc.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kc.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.KubeconfigFor(sa.Name, tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(t.TempDir(), "proxy.token")
	if err := os.WriteFile(token, []byte(tr.Status.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, token
}

// seatsCharged returns the sum of apiserver_flowcontrol_work_estimated_seats
// of flow schema "exempt" (kube's admins) scraped from base's /metrics with
// token, an admin's: the scrape itself counts one seat (the proxy, like
// kube-apiserver, serves /metrics to admins only when it has a token file).
func seatsCharged(t *testing.T, base, token string) float64 {
	t.Helper()
	return metricSum(t, base, token, "apiserver_flowcontrol_work_estimated_seats_sum", `flow_schema="exempt"`)
}

// metricSum adds the values of the series of name whose labels contain
// label, scraped from base's /metrics with token.
func metricSum(t *testing.T, base, token, name, label string) float64 {
	t.Helper()
	cfg := &rest.Config{Host: base, BearerToken: token}
	if strings.HasPrefix(base, "https://") {
		cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true} // kube-apiserver's own, just started
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", base, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		series, value, ok := strings.Cut(line, " ")
		if ok && strings.HasPrefix(series, name+"{") && strings.Contains(series, label) {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// TestProxyReadyzWithTheUpstreamStopped: in front of a real kube-apiserver
// over TLS, /readyz is ready, then fails once kube-apiserver is stopped,
// while /livez stays the proxy's own ok.
func TestProxyReadyzWithTheUpstreamStopped(t *testing.T) {
	t.Parallel()
	cp, ca := startKube(t)
	url := runProxy(t, "--upstream", cp.URL, "--upstream-ca", ca)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	readyz(ctx, t, url, http.StatusOK, "ok")
	cp.Stop()
	readyz(ctx, t, url, http.StatusInternalServerError, "[+]ping ok\n[-]upstream failed: reason withheld\nreadyz check failed\n")
	if code, body := probe(t, url+"/livez"); code != http.StatusOK || body != "ok" {
		t.Errorf("livez with the upstream stopped: %d %q", code, body)
	}
}
