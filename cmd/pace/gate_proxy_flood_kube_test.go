package main

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestProxyContainsBadTokenFloods puts pace gate proxy, reviewing tokens
// with a real kube-apiserver (--authentication-kubeconfig), under a flood of
// made-up bearer tokens from one address (127.0.0.1) while new users, each
// with a service-account token never seen before, call from another
// (127.0.0.2). Their first requests are timed without the flood and during
// it, in the same run: the flood may slow them by the machine's load, not
// by waiting behind its reviews. The flood itself gets its burst of 401s,
// then 429s with Retry-After, at about the refill rate.
func TestProxyContainsBadTokenFloods(t *testing.T) {
	t.Parallel()
	cp, upstreamCA := startKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(cp.Admin)
	proxyKubeconfig, _ := proxyIdentity(ctx, t, cp, kc)
	url := runProxy(t, "--upstream", cp.URL, "--upstream-ca", upstreamCA, "--authentication-kubeconfig", proxyKubeconfig,
		"--authentication-failure-rate", "2", "--authentication-failure-burst", "10")

	if _, err := kc.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "newcomer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Few enough that the quiet ones fit in client-go's default burst of
	// 10 requests: the quiet baseline is never rate-limited.
	const users = 8
	tokens := make([]string, 2*users) // each a new user to the proxy's cache
	for i := range tokens {
		tr, err := kc.CoreV1().ServiceAccounts("default").CreateToken(ctx, "newcomer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = tr.Status.Token
	}
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
		return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
	}
	// get returns the status of GET /api with token, and its Retry-After.
	get := func(c *http.Client, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api", nil)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After"), nil
	}
	newUsers := from("127.0.0.2")
	timed := func(token string) time.Duration {
		start := time.Now()
		status, _, err := get(newUsers, token)
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusOK {
			t.Fatalf("a user's request: %d, want 200", status)
		}
		return time.Since(start)
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	// firstRequests times each new user's first request and, before it, one
	// of a user the proxy knows already (known: its review is cached), whose
	// time is the machine's load alone; it returns both medians.
	firstRequests := func(tokens []string, known string) (first, control time.Duration) {
		var firsts, controls []time.Duration
		for _, tok := range tokens {
			controls = append(controls, timed(known))
			firsts = append(firsts, timed(tok))
		}
		return median(firsts), median(controls)
	}
	if _, _, err := get(newUsers, "warm-up-"+rand.Text()); err != nil { // the connection, not a measure
		t.Fatal(err)
	}
	known := tokens[0]
	timed(known)
	quiet, quietControl := firstRequests(tokens[1:users], known)

	var unauthorized, throttled, other atomic.Int64
	firstThrottled := make(chan struct{})
	var once sync.Once
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	flooder := from("127.0.0.1")
	start := time.Now()
	for range 4 {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				status, retryAfter, err := get(flooder, "made-up-"+rand.Text())
				switch {
				case err != nil:
					if floodCtx.Err() == nil {
						other.Add(1)
					}
				case status == http.StatusUnauthorized:
					unauthorized.Add(1)
				case status == http.StatusTooManyRequests && retryAfter != "":
					throttled.Add(1)
					once.Do(func() { close(firstThrottled) })
				default:
					other.Add(1)
				}
			}
		})
	}
	select {
	case <-firstThrottled:
	case <-ctx.Done():
		t.Fatalf("the flood was never throttled: %d 401s", unauthorized.Load())
	}
	flooded, floodedControl := firstRequests(tokens[users:], known)
	stopFlood()
	wg.Wait()
	elapsed := time.Since(start)

	// The flood shares this machine's cores: it slows every request, a
	// known user's too. What it must not add is a wait behind its reviews.
	load := max(1, float64(floodedControl)/float64(quietControl))
	t.Logf("new users' first request, median: %s quiet, %s during the flood from another address (%d 401s, %d 429s in %s); a known user's %s and %s (load × %.1f)",
		quiet, flooded, unauthorized.Load(), throttled.Load(), elapsed.Round(time.Millisecond), quietControl, floodedControl, load)
	if bound := time.Duration(5 * load * float64(quiet)); flooded > bound {
		t.Errorf("during the flood new users took %s, over 5 × their quiet %s × the flood's load on a known user's requests (%.1f): the flood delays them", flooded, quiet, load)
	}
	// Reviews of made-up tokens: the burst, then 2 per second.
	if maxReviews := 10 + int64(2*elapsed.Seconds()) + 2; unauthorized.Load() > maxReviews || other.Load() > 0 {
		t.Errorf("flood: %d 401s (want at most %d in %s), %d other answers", unauthorized.Load(), maxReviews, elapsed, other.Load())
	}
}
