package auth

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
)

// ClientCert authenticates the TLS client certificate of a request verified
// against Roots, as kube-apiserver's --client-ca-file: the subject's common
// name is the user, its organizations are the groups, and the extra
// CredentialIDKey names the certificate. The server must ask
// for client certificates (tls.RequestClientCert) without verifying them.
type ClientCert struct {
	Roots *x509.CertPool
}

// Authenticate implements Authenticator.
func (c ClientCert) Authenticate(r *http.Request) (User, bool, error) {
	cert, err := verifiedPeer(r, c.Roots)
	switch {
	case cert == nil && err == nil:
		return User{}, false, nil
	case err != nil:
		return User{}, true, fmt.Errorf("client certificate: %w", err)
	case cert.Subject.CommonName == "":
		return User{}, true, errors.New("client certificate: no common name (the user)")
	}
	groups := append(slices.Clone(cert.Subject.Organization), Authenticated)
	fp := sha256.Sum256(cert.Raw)
	return User{Name: cert.Subject.CommonName, Groups: groups,
		Extra: map[string][]string{CredentialIDKey: {"X509SHA256=" + hex.EncodeToString(fp[:])}}}, true, nil
}

// CredentialIDKey is the extra naming the credential a user authenticated
// with, as kube-apiserver sets it (for a client certificate, X509SHA256=
// and the hex SHA-256 of the certificate): audit logs and authorizers tell
// one credential of a user from another by it.
const CredentialIDKey = "authentication.kubernetes.io/credential-id"

// verifiedPeer returns the request's client certificate verified against
// roots for client authentication; nil and no error when it has none.
func verifiedPeer(r *http.Request, roots *x509.CertPool) (*x509.Certificate, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, nil
	}
	certs := r.TLS.PeerCertificates
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return certs[0], err
	}
	return certs[0], nil
}

// LoadCAs reads a PEM bundle of CA certificates.
func LoadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return pool, nil
}
