package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pace-platform/pace/bus/bustest"
)

// BenchmarkProxyOverhead measures what pace gate proxy adds to a client-go
// call: the same GET of one configmap from a minimal HTTPS upstream (HTTP/2,
// a fixed 300-byte JSON answer) directly, through a bare
// httputil.ReverseProxy (the cost of the extra hop alone: HTTPS and HTTP/2
// in, HTTP/2 out) and through pace gate proxy (HTTPS, a token file:
// authentication costs a lookup; the default policy, APF on). Both proxies
// run in the benchmark's process, so that they share its conditions; the
// three sides take turns, one request each, in rotating order. It reports
// each side's median and 99th percentile, the median added by pace gate
// proxy over the direct call, and over the bare proxy (µs).
//
//	go test -run '^$' -bench ProxyOverhead -benchtime 20000x ./cmd/pace/
func BenchmarkProxyOverhead(b *testing.B) {
	const body = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"default","uid":"9c4c","resourceVersion":"1",` +
		`"creationTimestamp":"2026-01-01T00:00:00Z"},"data":{"key":"value of about a hundred bytes, as small configmaps hold, padded to size........"}}`
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	upstream.EnableHTTP2 = true
	upstream.StartTLS()
	defer upstream.Close()
	dir := b.TempDir()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	ca, tokens := filepath.Join(dir, "upstream.crt"), filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte("bench-token,bench,1,dev\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	tlsFiles := bustest.TLS(b)
	proxyCA, err := os.ReadFile(tlsFiles.CA)
	if err != nil {
		b.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(tlsFiles.Cert, tlsFiles.Key)
	if err != nil {
		b.Fatal(err)
	}

	upURL, err := url.Parse(upstream.URL)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(upURL)
	rp.Transport = upstream.Client().Transport
	bare := httptest.NewUnstartedServer(rp)
	bare.EnableHTTP2 = true
	bare.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	bare.StartTLS()
	defer bare.Close()

	addr := freeAddr(b)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"gate", "proxy", "--http", addr, "--upstream", upstream.URL, "--upstream-ca", ca,
			"--tls-cert", tlsFiles.Cert, "--tls-key", tlsFiles.Key, "--token-file", tokens, "--log-level", "warn"}, nil, w, io.Discard)
		_ = w.Close()
	}()
	defer func() { cancel(); <-done }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP: ") {
		b.Fatalf("pace gate proxy: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	client := func(host string, caData []byte) kubernetes.Interface {
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: host, BearerToken: "bench-token",
			TLSClientConfig: rest.TLSClientConfig{CAData: caData}, QPS: -1})
	}
	sides := []kubernetes.Interface{client(upstream.URL, caPEM), client(bare.URL, proxyCA), client("https://"+addr, proxyCA)}
	get := func(c kubernetes.Interface) time.Duration {
		start := time.Now()
		if err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/configmaps/x").Do(ctx).Error(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 200 { // connections, caches, the proxy's first classification
		for _, c := range sides {
			get(c)
		}
	}
	took := make([][]time.Duration, len(sides))
	b.ResetTimer()
	for i := range b.N {
		for j := range sides {
			k := (i + j) % len(sides)
			took[k] = append(took[k], get(sides[k]))
		}
	}
	b.StopTimer()
	q := func(ds []time.Duration, f float64) float64 {
		slices.Sort(ds)
		return float64(ds[int(f*float64(len(ds)-1))].Nanoseconds()) / 1e3
	}
	for i, name := range []string{"direct", "bare", "pace"} {
		b.ReportMetric(q(took[i], 0.5), name+"-p50-µs")
		b.ReportMetric(q(took[i], 0.99), name+"-p99-µs")
	}
	b.ReportMetric(q(took[2], 0.5)-q(took[0], 0.5), "added-p50-µs")
	b.ReportMetric(q(took[2], 0.5)-q(took[1], 0.5), "over-bare-p50-µs")
}

// BenchmarkReverseProxyHop measures the floor under any HTTP proxy written
// on net/http: what one httputil.ReverseProxy hop adds to a plain net/http
// GET of the same 300 bytes from a minimal HTTPS upstream, with HTTP/2 and
// with HTTP/1.1 on each side of the hop, and what the TLS hop alone adds (a
// forwarder that terminates TLS and copies bytes, reading no HTTP), all
// sides taking turns in one process as in BenchmarkProxyOverhead. It reports
// each side's median and each hop's cost over the direct call of the same
// protocol (µs).
//
//	go test -run '^$' -bench ReverseProxyHop -benchtime 20000x ./cmd/pace/
func BenchmarkReverseProxyHop(b *testing.B) {
	body := strings.Repeat("x", 300)
	serve := func(h http.Handler, h2 bool) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		s.EnableHTTP2 = h2
		s.StartTLS()
		b.Cleanup(s.Close)
		return s
	}
	client := func(h2 bool) *http.Client {
		return &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: h2, MaxIdleConnsPerHost: 10,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the benchmark's own test servers
	}
	upstream := serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }), true)
	upURL, err := url.Parse(upstream.URL)
	if err != nil {
		b.Fatal(err)
	}
	hop := func(h2 bool) string {
		rp := httputil.NewSingleHostReverseProxy(upURL)
		rp.Transport = client(h2).Transport
		return serve(rp, h2).URL
	}
	sides := []struct {
		name string
		c    *http.Client
		url  string
	}{
		{"direct-h2", client(true), upstream.URL},
		{"hop-h2", client(true), hop(true)},
		{"direct-h1", client(false), upstream.URL},
		{"hop-h1", client(false), hop(false)},
		{"tls-h2", client(true), tlsForwarder(b, upstream)},
	}
	get := func(i int) time.Duration {
		start := time.Now()
		res, err := sides[i].c.Get(sides[i].url + "/x")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return time.Since(start)
	}
	for range 200 {
		for i := range sides {
			get(i)
		}
	}
	took := make([][]time.Duration, len(sides))
	b.ResetTimer()
	for i := range b.N {
		for j := range sides {
			k := (i + j) % len(sides)
			took[k] = append(took[k], get(k))
		}
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
	}
	for i, s := range sides {
		b.ReportMetric(p50(took[i]), s.name+"-p50-µs")
	}
	b.ReportMetric(p50(took[1])-p50(took[0]), "hop-h2-added-p50-µs")
	b.ReportMetric(p50(took[3])-p50(took[2]), "hop-h1-added-p50-µs")
	b.ReportMetric(p50(took[4])-p50(took[0]), "tls-h2-added-p50-µs")
}

// tlsForwarder serves TLS with upstream's certificate and HTTP/2 offered,
// and copies each connection's bytes to and from a TLS connection of its own
// to upstream: a hop that reads no HTTP. It returns its URL.
func tlsForwarder(b *testing.B, upstream *httptest.Server) string {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: upstream.TLS.Certificates, NextProtos: []string{"h2"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := tls.Dial("tcp", upstream.Listener.Addr().String(),
					&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // the benchmark's own test server
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in) }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return "https://" + ln.Addr().String()
}
