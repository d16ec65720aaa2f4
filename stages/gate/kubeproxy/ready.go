package kubeproxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Readiness checks: the upstream is asked at most every
// checkEvery, each check bounded by checkTimeout.
const (
	checkEvery   = time.Second
	checkTimeout = 2 * time.Second
)

// Readiness reports whether the upstream answers its own /readyz
// with 200, asking it at most once every checkEvery however many
// probes come: the others get the last answer.
type Readiness struct {
	rt    http.RoundTripper
	url   string // the upstream's /readyz
	token string // the proxy's own bearer token upstream, if any
	clk   clock.PassiveClock
	log   *slog.Logger

	mu      sync.Mutex // held across a check: probes wait for it rather than start their own
	checked time.Time
	err     error
}

// NewReadiness checks the /readyz of up through rt, with the proxy's own
// bearer token when it has one.
func NewReadiness(rt http.RoundTripper, up *url.URL, token string, log *slog.Logger) *Readiness {
	u := *up
	u.Path = strings.TrimSuffix(u.Path, "/") + "/readyz"
	u.RawQuery = ""
	return &Readiness{rt: rt, url: u.String(), token: token, clk: clock.RealClock{}, log: log}
}

// Check returns nil when the upstream is ready, else why not.
func (u *Readiness) Check(ctx context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if now := u.clk.Now(); !u.checked.IsZero() && now.Sub(u.checked) < checkEvery {
		return u.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
	defer cancel()
	u.err = u.ask(ctx)
	u.checked = u.clk.Now()
	if u.err != nil {
		u.log.Warn("upstream not ready", "err", u.err)
	}
	return u.err
}

func (u *Readiness) ask(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url, nil)
	if err != nil {
		return err
	}
	if u.token != "" {
		req.Header.Set("Authorization", "Bearer "+u.token)
	}
	resp, err := u.rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u.url, resp.Status)
	}
	return nil
}

// HealthCheck is one named check of a health endpoint; nil is healthy.
type HealthCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// HealthHandler answers a probe as kube-apiserver does: 200 "ok" when every
// check passes (with ?verbose, one "[+]name ok" line per check and
// "<endpoint> check passed"); else 500 with the list, each failure as
// "[-]name failed: reason withheld" (the reason is logged, not shown).
func HealthHandler(endpoint string, checks ...HealthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		failed := false
		for _, c := range checks {
			if err := c.Check(r.Context()); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", c.Name)
				continue
			}
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", b.String(), endpoint)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprintf(w, "%s%s check passed\n", b.String(), endpoint)
			return
		}
		fmt.Fprint(w, "ok")
	}
}

// Ping is the check that always passes: the server answers.
var Ping = HealthCheck{Name: "ping", Check: func(context.Context) error { return nil }}
