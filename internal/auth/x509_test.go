package auth_test

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/auth"
)

// TestClientCert: the common name is the user, the organizations the
// groups, and the certificate's SHA-256 the credential ID, as kube sets it
// (the cluster's view of it through the proxy is checked by
// TestProxyAuthenticatesAsTheCluster, cmd/pace).
func TestClientCert(t *testing.T) {
	ca := bustest.NewCA(t, "clients")
	pem, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cert := ca.Client("carol", "dev", "ops")
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
	u, ok, err := auth.ClientCert{Roots: roots}.Authenticate(r)
	fp := sha256.Sum256(leaf.Raw)
	want := auth.User{Name: "carol", Groups: []string{"dev", "ops", auth.Authenticated},
		Extra: map[string][]string{auth.CredentialIDKey: {"X509SHA256=" + hex.EncodeToString(fp[:])}}}
	if diff := cmp.Diff(want, u); !ok || err != nil || diff != "" {
		t.Errorf("%v %v (-want +got):\n%s", ok, err, diff)
	}
}
