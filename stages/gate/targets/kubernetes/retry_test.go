package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRetryCause(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"success", context.Background(), nil, ""},
		{"throttled", context.Background(), apierrors.NewTooManyRequests("slow down", 1), "throttled"},
		{"conflict", context.Background(), apierrors.NewConflict(jobs, "pace-j", errors.New("changed")), "conflict"},
		{"own create came back", context.Background(), apierrors.NewAlreadyExists(jobs, "pace-j"), "already exists"},
		{"internal error", context.Background(), apierrors.NewInternalError(errors.New("etcd")), "server error"},
		{"unavailable", context.Background(), apierrors.NewServiceUnavailable("restarting"), "server error"},
		{"server timeout", context.Background(), apierrors.NewServerTimeout(jobs, "patch", 1), "server timeout"},
		{"forbidden is final", context.Background(), apierrors.NewForbidden(jobs, "pace-j", errors.New("rbac")), ""},
		{"invalid is final", context.Background(), apierrors.NewBadRequest("bad patch"), ""},
		{"no image is final", context.Background(), ErrNoImage, ""},
		{"connection reset", context.Background(), &url.Error{Op: "Patch", URL: "https://k", Err: syscall.ECONNRESET}, "connection"},
		{"attempt timeout", context.Background(), &url.Error{Op: "Patch", URL: "https://k", Err: context.DeadlineExceeded}, "timeout"},
		{"rate limiter wait", context.Background(), fmt.Errorf("client rate limiter Wait returned an error: %w", context.DeadlineExceeded), "timeout"},
		{"caller gone", cancelled, &url.Error{Op: "Patch", URL: "https://k", Err: context.Canceled}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryCause(tc.ctx, tc.err); got != tc.want {
				t.Errorf("retryCause(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
