package kubestatus_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pace-platform/pace/internal/kubestatus"
)

// TestWrite: the bodies kube-apiserver writes, byte for byte in field order
// and content (client-go's decoding of them is TestProxyAnswersKubeStatus,
// cmd/pace).
func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		code       int
		retryAfter string
		want       string
	}{
		{401, "", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"Unauthorized","code":401}`},
		{403, "", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"Forbidden","code":403}`},
		{429, "3", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"TooManyRequests","details":{"retryAfterSeconds":3},"code":429}`},
		{502, "", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","code":502}`},
		{504, "", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"Timeout","code":504}`},
	} {
		w := httptest.NewRecorder()
		if tc.retryAfter != "" {
			w.Header().Set("Retry-After", tc.retryAfter)
		}
		kubestatus.Write(w, tc.code, "m")
		if got := strings.TrimSpace(w.Body.String()); got != tc.want || w.Code != tc.code || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%d: %d %s %s\nwant %s", tc.code, w.Code, w.Header().Get("Content-Type"), got, tc.want)
		}
	}
}
