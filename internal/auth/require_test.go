package auth_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pace-platform/pace/internal/auth"
)

func TestRequire(t *testing.T) {
	tf, err := auth.ParseTokens(strings.NewReader(tokens + "p,prometheus,9,\"pace:metrics\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h := auth.Middleware(tf)(auth.Require(auth.Admins, auth.Masters, auth.MetricsReaders)(ok))
	tests := []struct {
		name, header string
		want         int
	}{
		{"admin", "Bearer s3cret", http.StatusOK},
		{"metrics reader", "Bearer p", http.StatusOK},
		{"tenant", "Bearer t0ken", http.StatusForbidden},
		{"anonymous", "", http.StatusUnauthorized},
		{"unknown token", "Bearer nope", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/metrics", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.want == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}
