package bustest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are PEM files of a throwaway certificate authority and of one
// certificate it signed for 127.0.0.1 and localhost, usable by servers and
// clients alike.
type TLSFiles struct {
	CA, Cert, Key string
}

// TLS writes a new CA and a certificate for loopback into a temporary
// directory. Each call makes a different CA.
func TLS(t testing.TB) TLSFiles {
	t.Helper()
	ca := NewCA(t, "pace test CA")
	key := mustKey(t)
	der := ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "pace test"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}, key)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(ca.File)
	f := TLSFiles{CA: ca.File, Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	writePEM(t, f.Cert, "CERTIFICATE", der)
	writePEM(t, f.Key, "EC PRIVATE KEY", keyDER)
	return f
}

// CA is a throwaway certificate authority whose certificate is in File.
type CA struct {
	File   string
	t      testing.TB
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
}

// NewCA makes a CA named name and writes its certificate into a temporary
// directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{File: filepath.Join(t.TempDir(), "ca.pem"), t: t, cert: cert, key: key, serial: 1}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Client issues a client certificate for the user cn in the groups orgs
// (kube-apiserver's reading of a client certificate).
func (c *CA) Client(cn string, orgs ...string) tls.Certificate {
	c.t.Helper()
	key := mustKey(c.t)
	der := c.sign(&x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: orgs},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// sign issues tmpl for key, valid from an hour ago for a day.
func (c *CA) sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey) []byte {
	c.t.Helper()
	c.serial++
	tmpl.SerialNumber = big.NewInt(c.serial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		c.t.Fatal(err)
	}
	return der
}

func mustKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, file, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
