package kubeproxy

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// Upstream limits: connecting, the TLS handshake and the response headers
// are bounded (kube-apiserver answers within its 60 s request timeout and
// starts a watch at once); response bodies stream without a limit.
const (
	dialTimeout     = 10 * time.Second
	tlsTimeout      = 10 * time.Second
	headerTimeout   = 90 * time.Second
	maxHeaderBytes  = 1 << 20
	idleConnTimeout = 90 * time.Second
)

// Transport sends requests to the upstream over HTTP/2 when it speaks it,
// except protocol upgrades: SPDY/3.1 and WebSocket (exec, attach,
// port-forward, proxy) switch an HTTP/1.1 connection to another protocol,
// which HTTP/2 cannot carry.
type Transport struct {
	h2, h1 *http.Transport
}

// NewTransport returns a transport to the upstream with cfg's TLS settings
// (its roots, its client certificate); nil means the system's roots and no
// client certificate.
func NewTransport(cfg *tls.Config) *Transport {
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	h2 := &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:        cfg.Clone(), // the transport sets NextProtos on it; cfg may be shared
		TLSHandshakeTimeout:    tlsTimeout,
		ResponseHeaderTimeout:  headerTimeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		IdleConnTimeout:        idleConnTimeout,
		MaxIdleConnsPerHost:    100, // as many as requests the levels run at once, roughly
		ForceAttemptHTTP2:      true,
	}
	// Upgrades go over HTTP/1.1: ALPN offers only http/1.1, and no
	// TLSNextProto entry lets the transport switch to HTTP/2.
	h1 := h2.Clone()
	h1.ForceAttemptHTTP2 = false
	h1.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	h1.TLSClientConfig.NextProtos = []string{"http/1.1"}
	h1.MaxIdleConnsPerHost = 0 // the default, 2: an upgraded connection is never reused
	return &Transport{h2: h2, h1: h1}
}

// RoundTrip implements http.RoundTripper. httputil.ReverseProxy keeps a
// client's Upgrade header (and Connection: Upgrade) on the outgoing request.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Upgrade") != "" {
		return t.h1.RoundTrip(r)
	}
	return t.h2.RoundTrip(r)
}

// CloseIdleConnections closes both transports' idle connections.
func (t *Transport) CloseIdleConnections() {
	t.h2.CloseIdleConnections()
	t.h1.CloseIdleConnections()
}

// copyBuffers are the buffers httputil.ReverseProxy copies response
// bodies through, reused (an httputil.BufferPool).
type copyBuffers struct{ pool sync.Pool }

// Get returns a buffer of 32 KiB, the size ReverseProxy would allocate.
func (c *copyBuffers) Get() []byte {
	if b, ok := c.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

// Put returns b to the pool.
func (c *copyBuffers) Put(b []byte) { c.pool.Put(&b) }
