package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// ClientCert authenticates the TLS client certificate of a request verified
// against Roots, as kube-apiserver's --client-ca-file: the subject's common
// name is the user, its organizations are the groups. The server must ask
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
	return User{Name: cert.Subject.CommonName, Groups: groups}, true, nil
}

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
