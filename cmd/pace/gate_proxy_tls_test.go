package main

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProxyTLS serves the proxy over HTTPS (--tls-cert/--tls-key) in front
// of an HTTPS upstream that requires a client certificate: the proxy
// verifies the upstream with --upstream-ca and presents --upstream-cert.
// Plain HTTP is refused on the HTTPS port, oversized headers get 431, and
// an upstream the proxy cannot verify gets 502.
func TestProxyTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	proxyCert, proxyKey, pool := serverCert(t)
	clientCert, clientKey, _ := serverCert(t)

	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// RequireAnyClientCert below: the handler sees the proxy's certificate
		_, _ = io.WriteString(w, "client "+r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	upstream.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS12}
	upstream.StartTLS()
	defer upstream.Close()
	ca := filepath.Join(dir, "upstream-ca.crt")
	must(os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw}), 0o600))

	url := startProxy(t, upstream.URL, "--tls-cert", proxyCert, "--tls-key", proxyKey,
		"--upstream-ca", ca, "--upstream-cert", clientCert, "--upstream-key", clientKey)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("proxy printed %q, want an https URL", url)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(hc *http.Client, url string, header http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Header = header
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() //nolint:errcheck // read-only
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	auth := http.Header{"Authorization": {"Bearer mouse"}}
	if code, body := get(hc, url+"/api/v1/namespaces", auth); code != http.StatusOK || body != "client pace test" {
		t.Errorf("through the proxy: %d %q, want 200 from the upstream seeing the client certificate", code, body)
	}
	if resp, err := http.Get(strings.Replace(url, "https://", "http://", 1) + "/healthz"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered on the HTTPS port")
		}
	}
	big := http.Header{"Authorization": {"Bearer mouse"}, "X-Big": {strings.Repeat("x", 100<<10)}}
	if code, _ := get(hc, url+"/api/v1/namespaces", big); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("100 KiB of headers: %d, want 431", code)
	}

	unverified := startProxy(t, upstream.URL, "--upstream-cert", clientCert, "--upstream-key", clientKey)
	if code, body := get(http.DefaultClient, unverified+"/api/v1/namespaces", auth); code != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Errorf("upstream not verifiable: %d %s, want 502 naming the certificate", code, body)
	}
}

// TestProxyUsageErrors: bad TLS and upstream flags are usage errors naming the flag.
func TestProxyUsageErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--upstream", "127.0.0.1:6443"}, "--upstream"},
		{[]string{"--upstream", "https://127.0.0.1:6443", "--tls-cert", "x.crt"}, "--tls-key"},
		{[]string{"--upstream", "https://127.0.0.1:6443", "--upstream-cert", "x.crt"}, "--upstream-key"},
		{[]string{"--upstream", "http://127.0.0.1:6443", "--upstream-ca", "ca.crt"}, "https --upstream"},
		{[]string{"--upstream", "https://127.0.0.1:6443", "--upstream-ca", "/nonexistent/ca.crt"}, "--upstream-ca"},
	} {
		cmd := exec.Command(paceBin, append([]string{"gate", "proxy", "--http", "127.0.0.1:0"}, c.args...)...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), c.want) {
			t.Errorf("pace gate proxy %s: exit %d, %s; want %d naming %s", strings.Join(c.args, " "), code, out, exitUsage, c.want)
		}
	}
}
