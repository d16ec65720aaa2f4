// Package faultproxy is an HTTP reverse proxy that injects faults between a
// client and a real server, for fault tests. Each request matching a rule
// gets that rule's fault with the rule's probability, drawn from a seeded
// source, and the proxy counts what it injected per kind:
//
//   - an error status with a Kubernetes Status body: 429 Too Many Requests
//     with Retry-After, 409 Conflict, 500 Internal Error, 503 Service
//     Unavailable (with Retry-After);
//   - a connection reset before the request reaches the server;
//   - a hang: the request never reaches the server and the proxy answers
//     nothing until the client gives up;
//   - a lost response, the nastiest: the request is forwarded and executed
//     by the server, then the connection is reset instead of answering, so
//     the client sees an error for a write that happened.
//
// The proxy listens on plain HTTP on loopback and speaks TLS to the server.
package faultproxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fault is a kind of injected failure.
type Fault string

// The faults a Rule can inject.
const (
	TooManyRequests Fault = "429"
	Conflict        Fault = "409"
	InternalError   Fault = "500"
	Unavailable     Fault = "503"
	Reset           Fault = "reset"
	Hang            Fault = "hang"
	LostResponse    Fault = "lost-response"
)

// Faults lists every kind, in a stable order for reports.
var Faults = []Fault{TooManyRequests, Conflict, InternalError, Unavailable, Reset, Hang, LostResponse}

// Rule injects Fault into a share of the matching requests.
type Rule struct {
	Fault Fault
	// Methods limits the rule to these HTTP methods; empty means every method.
	Methods []string
	// Probability is the share of matching requests that get the fault, in
	// (0, 1]. The probabilities of the rules matching one method add up, and
	// their sum must not exceed 1.
	Probability float64
}

// RetryAfter is the Retry-After, in seconds, of injected 429 and 503 answers.
const RetryAfter = 1

// maxHang bounds a hang, should the client never give up.
const maxHang = time.Minute

// Proxy is a running fault-injecting reverse proxy. It is safe for
// concurrent use.
type Proxy struct {
	// URL is the proxy's address, http://127.0.0.1:PORT.
	URL string

	rules  []Rule
	rp     *httputil.ReverseProxy
	srv    *httptest.Server
	closed chan struct{} // closed by Close: hangs end

	mu       sync.Mutex
	rng      *rand.Rand     // guarded by mu
	counts   map[Fault]int  // guarded by mu
	requests map[string]int // by method; guarded by mu
}

// Start starts a proxy to target (an https:// URL whose server tlsConfig
// trusts) injecting faults by rules, with randomness from seed.
func Start(target string, tlsConfig *tls.Config, seed uint64, rules ...Rule) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q: want a URL such as https://127.0.0.1:6443", target)
	}
	if err := validate(rules); err != nil {
		return nil, err
	}
	p := &Proxy{rules: rules, closed: make(chan struct{}), rng: rand.New(rand.NewPCG(seed, 0)), //nolint:gosec // test randomness, replayable by seed
		counts: map[Fault]int{}, requests: map[string]int{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		// A clone: a Transport sets NextProtos on its TLS config, which the
		// caller may share with other clients (a race the detector sees).
		Transport:     &http.Transport{TLSClientConfig: tlsConfig.Clone(), ForceAttemptHTTP2: true},
		FlushInterval: -1, // watches stream through
	}
	p.srv = httptest.NewServer(p)
	p.URL = p.srv.URL
	return p, nil
}

func validate(rules []Rule) error {
	sums := map[string]float64{}
	for i, r := range rules {
		if !slices.Contains(Faults, r.Fault) {
			return fmt.Errorf("faultproxy: rules[%d].fault %q: want one of %v", i, r.Fault, Faults)
		}
		if r.Probability <= 0 || r.Probability > 1 {
			return fmt.Errorf("faultproxy: rules[%d].probability %v: want (0, 1]", i, r.Probability)
		}
		methods := r.Methods
		if len(methods) == 0 {
			methods = []string{"*"}
		}
		for _, m := range methods {
			sums[m] += r.Probability
		}
	}
	for m, sum := range sums {
		if m != "*" {
			sum += sums["*"]
		}
		if sum > 1 {
			return fmt.Errorf("faultproxy: the rules for method %s add up to probability %v, more than 1", m, sum)
		}
	}
	return nil
}

// Close stops the proxy, ending hangs.
func (p *Proxy) Close() {
	close(p.closed)
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// Counts returns the faults injected so far, by kind.
func (p *Proxy) Counts() map[Fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Fault]int, len(p.counts))
	for f, n := range p.counts {
		out[f] = n
	}
	return out
}

// Requests returns the requests received so far, by HTTP method.
func (p *Proxy) Requests() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.requests))
	for m, n := range p.requests {
		out[m] = n
	}
	return out
}

// pick draws the fault for a request with method, "" for none, and counts it.
func (p *Proxy) pick(method string) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests[method]++
	u, acc := p.rng.Float64(), 0.0
	for _, r := range p.rules {
		if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
			continue
		}
		if acc += r.Probability; u < acc {
			p.counts[r.Fault]++
			return r.Fault
		}
	}
	return ""
}

// ServeHTTP forwards r to the target or injects a fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch f := p.pick(r.Method); f {
	case "":
		p.rp.ServeHTTP(w, r)
	case TooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
		writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "injected: too many requests")
	case Unavailable:
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "injected: service unavailable")
	case Conflict:
		writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict, "injected: the object has been modified")
	case InternalError:
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected: internal error")
	case Reset:
		reset(w)
	case Hang:
		select {
		case <-r.Context().Done(): // the client gave up
		case <-p.closed:
		case <-time.After(maxHang):
		}
		reset(w)
	case LostResponse:
		// The server executes the request in full; its answer is discarded.
		ctx := context.WithoutCancel(r.Context())
		p.rp.ServeHTTP(discard{header: http.Header{}}, r.WithContext(ctx))
		reset(w)
	}
}

// writeStatus answers with a Kubernetes Status, as the apiserver does.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	body, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code)}) //nolint:gosec // an HTTP status
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// reset closes the client's connection with a TCP RST and no answer.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(fmt.Sprintf("faultproxy: hijack: %v", err)) // HTTP/1 servers always can
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // RST instead of FIN
	}
	_ = conn.Close()
}

// discard is a ResponseWriter that drops the answer of a lost response.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
