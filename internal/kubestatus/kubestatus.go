// Package kubestatus writes the error responses of a server standing in
// for kube-apiserver as kube-apiserver writes them: a metav1.Status object
// (kind Status, apiVersion v1, status Failure, the message, a reason and
// the code), which client-go turns into typed errors
// (apierrors.IsUnauthorized, IsForbidden, IsTooManyRequests, ...) and
// kubectl prints as "Error from server (Reason): message".
package kubestatus

import (
	"encoding/json"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reasons are kube's StatusReason by code; a code without one has none.
var reasons = map[int]metav1.StatusReason{
	http.StatusBadRequest:            metav1.StatusReasonBadRequest,
	http.StatusUnauthorized:          metav1.StatusReasonUnauthorized,
	http.StatusForbidden:             metav1.StatusReasonForbidden,
	http.StatusNotFound:              metav1.StatusReasonNotFound,
	http.StatusMethodNotAllowed:      metav1.StatusReasonMethodNotAllowed,
	http.StatusRequestTimeout:        metav1.StatusReasonTimeout,
	http.StatusRequestEntityTooLarge: metav1.StatusReasonRequestEntityTooLarge,
	http.StatusTooManyRequests:       metav1.StatusReasonTooManyRequests,
	http.StatusInternalServerError:   metav1.StatusReasonInternalError,
	http.StatusServiceUnavailable:    metav1.StatusReasonServiceUnavailable,
	http.StatusGatewayTimeout:        metav1.StatusReasonTimeout,
}

// Status returns the Status object kube-apiserver answers code with.
// retryAfterSeconds, when positive, goes into its details, as kube sets
// them for 429 and 504.
func Status(code int, msg string, retryAfterSeconds int) *metav1.Status {
	s := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: reasons[code], Code: int32(code)} //nolint:gosec // an HTTP status code
	if retryAfterSeconds > 0 {
		s.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(retryAfterSeconds)} //nolint:gosec // seconds, small
	}
	return s
}

// Write answers code with the Status of msg, its details carrying the
// Retry-After header already set on w. It is an auth.ErrorWriter.
func Write(w http.ResponseWriter, code int, msg string) {
	retryAfter, _ := strconv.Atoi(w.Header().Get("Retry-After"))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(Status(code, msg, retryAfter))
}
