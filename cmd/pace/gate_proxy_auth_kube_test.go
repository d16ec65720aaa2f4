package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/internal/auth"
)

// TestProxyAuthenticatesAsTheCluster puts pace gate proxy with the whole
// authentication chain in front of a real kube-apiserver, as the service
// account of the documented RBAC, impersonating each caller upstream: a client certificate, a
// service-account token and the admin's token (both verified by the
// cluster's TokenReview) are each classified as themselves by the cluster's
// own FlowSchemas (the cluster's UID, once) and authorized upstream as
// themselves; forged X-Remote-* headers mean nothing without the front
// proxy's certificate, and mean the caller with it; a client's own
// Impersonate-* is refused; a bad token gets 401.
func TestProxyAuthenticatesAsTheCluster(t *testing.T) {
	t.Parallel()
	cp, upstreamCA := startKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(cp.Admin)
	// The proxy runs as the service account of the documented RBAC, which
	// is then all it needs.
	proxyKubeconfig, proxyToken := proxyIdentity(ctx, t, cp, kc)
	tlsCert, tlsKey, serverPool := serverCert(t)
	clients, fronts := bustest.NewCA(t, "clients"), bustest.NewCA(t, "front proxies")
	url := runProxy(t, "--upstream", cp.URL, "--upstream-ca", upstreamCA, "--tls-cert", tlsCert, "--tls-key", tlsKey,
		"--client-ca-file", clients.File, "--authentication-kubeconfig", proxyKubeconfig,
		"--requestheader-client-ca-file", fronts.File, "--requestheader-allowed-names", "front-proxy",
		"--kubeconfig", proxyKubeconfig, "--impersonate", "--upstream-token-file", proxyToken)

	uid := map[string]string{}
	for _, name := range []string{"exempt", "global-default", "service-accounts"} {
		fs, err := kc.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uid[name] = string(fs.UID)
	}
	if _, err := kc.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kc.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	robotToken := tr.Status.Token

	type caller struct {
		cert   *tls.Certificate
		token  string
		header map[string]string
	}
	call := func(c caller) (int, string, []string) {
		t.Helper()
		cfg := &tls.Config{RootCAs: serverPool, MinVersion: tls.VersionTLS12}
		if c.cert != nil {
			cfg.Certificates = []tls.Certificate{*c.cert}
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/namespaces/default/configmaps", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		for k, v := range c.header {
			req.Header.Add(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() //nolint:errcheck // read-only
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header.Values(apfhttp.HeaderFlowSchemaUID)
	}
	carol, frontProxy, stranger := clients.Client("carol", "dev"), fronts.Client("front-proxy"), clients.Client("front-proxy")
	for _, tc := range []struct {
		name   string
		caller caller
		status int
		user   string // named in the upstream's refusal
		schema string
	}{
		{"client certificate", caller{cert: &carol}, http.StatusForbidden, `User \"carol\"`, "global-default"},
		{"service-account token", caller{token: robotToken}, http.StatusForbidden, `User \"system:serviceaccount:default:robot\"`, "service-accounts"},
		{"admin token", caller{token: kubetest.AdminToken}, http.StatusOK, "", "exempt"},
		{"forged front-proxy headers", caller{token: kubetest.UserToken, header: map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}},
			http.StatusForbidden, `User \"alice\"`, "global-default"},
		{"front proxy", caller{cert: &frontProxy, header: map[string]string{"X-Remote-User": "dave", "X-Remote-Group": "dev"}},
			http.StatusForbidden, `User \"dave\"`, "global-default"},
		{"client certificate named like the front proxy", caller{cert: &stranger, header: map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}},
			http.StatusForbidden, `User \"front-proxy\"`, "global-default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, schemas := call(tc.caller)
			if status != tc.status || !strings.Contains(body, tc.user) {
				t.Errorf("%d %s, want %d naming %s", status, body, tc.status, tc.user)
			}
			if len(schemas) != 1 || schemas[0] != uid[tc.schema] {
				t.Errorf("flow schema UIDs %v, want the cluster's %s (%s) once", schemas, tc.schema, uid[tc.schema])
			}
		})
	}

	// Allowed upstream as itself: the service account, once it may list
	// configmaps (the aggregated view role needs a controller-manager).
	if _, err := kc.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "robot-reads"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "configmap-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "robot", Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for status, body, _ := call(caller{token: robotToken}); status != http.StatusOK; status, body, _ = call(caller{token: robotToken}) {
		if time.Now().After(deadline) {
			t.Fatalf("service account allowed to list configmaps: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body, _ := call(caller{token: kubetest.UserToken, header: map[string]string{"Impersonate-User": "admin"}}); status != http.StatusForbidden ||
		!strings.Contains(body, "impersonation is not passed") {
		t.Errorf("a client's Impersonate-User: %d %s, want 403 from the proxy", status, body)
	}
	if status, _, _ := call(caller{token: "not-a-token"}); status != http.StatusUnauthorized {
		t.Errorf("unknown token: %d, want 401", status)
	}

	// The cluster sees the certificate's credential ID, as it would have set
	// it itself: its SelfSubjectReview of carol, impersonated.
	cfg := &tls.Config{RootCAs: serverPool, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{carol}}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	resp, err := hc.Post(url+"/apis/authentication.k8s.io/v1/selfsubjectreviews", "application/json",
		strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	var review authenticationv1.SelfSubjectReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		t.Fatal(err)
	}
	fp := sha256.Sum256(carol.Certificate[0])
	want := authenticationv1.ExtraValue{"X509SHA256=" + hex.EncodeToString(fp[:])}
	if got := review.Status.UserInfo.Extra[auth.CredentialIDKey]; resp.StatusCode != http.StatusCreated ||
		review.Status.UserInfo.Username != "carol" || !slices.Equal(got, want) {
		t.Errorf("carol's self-review: %s, user %+v; want carol with credential ID %v", resp.Status, review.Status.UserInfo, want)
	}
}
