package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestProxyAnswersKubeStatus: what pace gate proxy answers itself, client-go
// reads as it reads kube-apiserver's answers: typed errors from Status
// objects (401 for an unknown token, 403 for a client's impersonation and
// for /metrics without the group, 429 with Retry-After when the limit is
// reached, 413 for a body over --max-body, 502 when the upstream is down).
func TestProxyAnswersKubeStatus(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			entered <- struct{}{}
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer upstream.Close()
	defer close(release)
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1,dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := runProxy(t, "--upstream", upstream.URL, "--token-file", tokens, "--max-body", "1024",
		"--enable-priority-and-fairness=false", "--max-requests-inflight", "1", "--max-mutating-requests-inflight", "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(cfg rest.Config) *kubernetes.Clientset {
		cfg.Host = url
		return kubernetes.NewForConfigOrDie(&cfg)
	}
	alice := client(rest.Config{BearerToken: "alice-token"})

	// status checks that err is the Status kube-apiserver would answer,
	// decoded by client-go: the proxy's message, not the one client-go
	// makes up for a body it cannot read.
	status := func(t *testing.T, err error, is func(error) bool, code int32, reason metav1.StatusReason, msg string) {
		t.Helper()
		var se apierrors.APIStatus
		if !errors.As(err, &se) || !is(err) {
			t.Fatalf("%v (%T), want a typed %s", err, err, reason)
		}
		if s := se.Status(); s.Code != code || s.Reason != reason || s.Status != metav1.StatusFailure || !strings.Contains(s.Message, msg) {
			t.Errorf("status %+v, want code %d, reason %s and a message with %q", s, code, reason, msg)
		}
	}
	t.Run("401", func(t *testing.T) {
		_, err := client(rest.Config{BearerToken: "nope"}).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		status(t, err, apierrors.IsUnauthorized, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "invalid bearer token")
	})
	t.Run("403 impersonation", func(t *testing.T) {
		_, err := client(rest.Config{BearerToken: "alice-token", Impersonate: rest.ImpersonationConfig{UserName: "admin"}}).
			CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		status(t, err, apierrors.IsForbidden, http.StatusForbidden, metav1.StatusReasonForbidden, "impersonation is not passed")
	})
	t.Run("403 metrics", func(t *testing.T) {
		err := alice.CoreV1().RESTClient().Get().AbsPath("/metrics").Do(ctx).Error()
		status(t, err, apierrors.IsForbidden, http.StatusForbidden, metav1.StatusReasonForbidden, "only members of")
	})
	t.Run("401 metrics", func(t *testing.T) {
		err := client(rest.Config{}).CoreV1().RESTClient().Get().AbsPath("/metrics").Do(ctx).Error()
		status(t, err, apierrors.IsUnauthorized, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "a bearer token is needed")
	})
	t.Run("413", func(t *testing.T) {
		err := alice.CoreV1().RESTClient().Post().AbsPath("/api/v1/namespaces/default/configmaps").
			Body([]byte(`{"data":{"x":"`+strings.Repeat("x", 2048)+`"}}`)).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		status(t, err, apierrors.IsRequestEntityTooLargeError, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "larger than 1024 bytes")
	})
	t.Run("429", func(t *testing.T) {
		held := make(chan error, 1)
		go func() {
			held <- alice.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/configmaps/slow").Do(ctx).Error()
		}()
		select { // the only read-only seat is taken
		case <-entered:
		case <-ctx.Done():
			t.Fatal("the held request never reached the upstream")
		}
		err := alice.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/configmaps").MaxRetries(0).Do(ctx).Error()
		status(t, err, apierrors.IsTooManyRequests, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many requests, please try again later")
		if after, ok := apierrors.SuggestsClientDelay(err); !ok || after != 1 {
			t.Errorf("suggested delay %d %v, want 1 s (Retry-After)", after, ok)
		}
		release <- struct{}{}
		if err := <-held; err != nil {
			t.Errorf("held request: %v", err)
		}
	})
	t.Run("502", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		proxyDown := runProxy(t, "--upstream", down.URL)
		_, err := kubernetes.NewForConfigOrDie(&rest.Config{Host: proxyDown}).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		var se apierrors.APIStatus
		if !errors.As(err, &se) || se.Status().Code != http.StatusBadGateway || !strings.Contains(se.Status().Message, "upstream") {
			t.Errorf("upstream down: %v, want a 502 Status naming the upstream", err)
		}
	})
}
