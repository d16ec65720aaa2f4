package faultproxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pace-platform/pace/integration/faultproxy"
)

// backend is a TLS server counting the requests that reach it.
func backend(t *testing.T) (*httptest.Server, *atomic.Int64, *tls.Config) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, &hits, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		fault      faultproxy.Fault
		wantStatus int  // 0: the client sees a transport error
		wantHit    bool // the request reached the server
	}{
		{faultproxy.TooManyRequests, http.StatusTooManyRequests, false},
		{faultproxy.Conflict, http.StatusConflict, false},
		{faultproxy.InternalError, http.StatusInternalServerError, false},
		{faultproxy.Unavailable, http.StatusServiceUnavailable, false},
		{faultproxy.Reset, 0, false},
		{faultproxy.Hang, 0, false},
		{faultproxy.LostResponse, 0, true},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			srv, hits, tlsCfg := backend(t)
			p, err := faultproxy.Start(srv.URL, tlsCfg, 1, faultproxy.Rule{Fault: tc.fault, Methods: []string{http.MethodPost}, Probability: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			cl := &http.Client{Timeout: 500 * time.Millisecond}

			resp, err := cl.Post(p.URL+"/x", "text/plain", strings.NewReader("body"))
			switch {
			case tc.wantStatus == 0 && err == nil:
				_ = resp.Body.Close()
				t.Fatalf("status %s, want a transport error", resp.Status)
			case tc.wantStatus != 0 && err != nil:
				t.Fatalf("%v, want status %d", err, tc.wantStatus)
			case tc.wantStatus != 0:
				_ = resp.Body.Close()
				if resp.StatusCode != tc.wantStatus || resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("status %d (%s), want %d with a JSON Status", resp.StatusCode, resp.Header.Get("Content-Type"), tc.wantStatus)
				}
			}
			if got := hits.Load() == 1; got != tc.wantHit {
				t.Errorf("request reached the server: %v, want %v", got, tc.wantHit)
			}
			if got := p.Counts()[tc.fault]; got != 1 {
				t.Errorf("Counts()[%s] = %d, want 1", tc.fault, got)
			}

			// Other methods pass through.
			resp, err = cl.Get(p.URL + "/x")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET: status %s, want 200 from the server", resp.Status)
			}
			if got := p.Requests(); got[http.MethodPost] != 1 || got[http.MethodGet] != 1 {
				t.Errorf("Requests() = %v, want one POST and one GET", got)
			}
		})
	}
}

func TestProbabilityIsSeeded(t *testing.T) {
	srv, _, tlsCfg := backend(t)
	run := func() map[faultproxy.Fault]int {
		p, err := faultproxy.Start(srv.URL, tlsCfg, 42,
			faultproxy.Rule{Fault: faultproxy.InternalError, Probability: 0.2},
			faultproxy.Rule{Fault: faultproxy.Conflict, Probability: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for range 200 {
			resp, err := http.Get(p.URL) //nolint:noctx // a test request
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
		return p.Counts()
	}
	first, second := run(), run()
	if first[faultproxy.InternalError] != second[faultproxy.InternalError] || first[faultproxy.Conflict] != second[faultproxy.Conflict] {
		t.Errorf("same seed, different faults: %v then %v", first, second)
	}
	if n := first[faultproxy.InternalError] + first[faultproxy.Conflict]; n < 30 || n > 90 {
		t.Errorf("%d faults in 200 requests at probability 0.3, want about 60", n)
	}
}

func TestInvalidRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target string
		rules  []faultproxy.Rule
		want   string
	}{
		{"no host", "nowhere", nil, "target"},
		{"unknown fault", "https://127.0.0.1:1", []faultproxy.Rule{{Fault: "teapot", Probability: 0.1}}, "rules[0].fault"},
		{"no probability", "https://127.0.0.1:1", []faultproxy.Rule{{Fault: faultproxy.Reset}}, "rules[0].probability"},
		{"sum over one", "https://127.0.0.1:1", []faultproxy.Rule{
			{Fault: faultproxy.Reset, Probability: 0.6},
			{Fault: faultproxy.Conflict, Methods: []string{http.MethodPatch}, Probability: 0.6}}, "method PATCH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := faultproxy.Start(tc.target, nil, 1, tc.rules...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
