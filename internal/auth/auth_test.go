package auth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/internal/auth"
)

const tokens = `# token,user,uid,groups
s3cret,alice,1001,"team-a,pace:admins"
t0ken,bob,1002
`

func TestTokenFile(t *testing.T) {
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		header  string
		want    auth.User
		wantOK  bool
		wantErr error
	}{
		{"alice", "Bearer s3cret", auth.User{Name: "alice", UID: "1001", Groups: []string{"team-a", "pace:admins", auth.Authenticated}}, true, nil},
		{"bob, lower-case scheme", "bearer t0ken", auth.User{Name: "bob", UID: "1002", Groups: []string{auth.Authenticated}}, true, nil},
		{"no header", "", auth.User{}, false, nil},
		{"basic auth", "Basic YWxpY2U6eA==", auth.User{}, false, nil},
		{"unknown token", "Bearer nope", auth.User{}, true, auth.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			got, ok, err := tf.Authenticate(r)
			if ok != tt.wantOK || !errors.Is(err, tt.wantErr) {
				t.Fatalf("ok, err = %v, %v; want %v, %v", ok, err, tt.wantOK, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTokensErrorsNameTheLine(t *testing.T) {
	for _, in := range []string{"a,b\n", "x,alice,1\nx,bob,2\n", ",alice,1\n"} {
		if _, err := auth.ParseTokens(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "line ") {
			t.Errorf("ParseTokens(%q) = %v, want an error naming the line", in, err)
		}
	}
}

func TestMiddleware(t *testing.T) {
	tf, _ := auth.ParseTokens(strings.NewReader(tokens))
	var seen auth.User
	h := auth.Middleware(tf)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = auth.FromContext(r.Context())
	}))
	for _, tc := range []struct {
		header   string
		code     int
		user     string
		isAdmin  bool
		isAnonym bool
	}{
		{"", 200, auth.Anonymous, false, true},
		{"Bearer s3cret", 200, "alice", true, false},
		{"Bearer t0ken", 200, "bob", false, false},
		{"Bearer wrong", 401, "", false, false},
	} {
		seen = auth.User{}
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.code || seen.Name != tc.user || seen.IsAdmin() != tc.isAdmin || seen.IsAnonymous() != tc.isAnonym {
			t.Errorf("%q: code %d user %+v; want %d %s admin=%v", tc.header, w.Code, seen, tc.code, tc.user, tc.isAdmin)
		}
	}
	if anon := auth.AnonymousUser(); !anon.InGroup(auth.Unauthenticated) {
		t.Errorf("anonymous user %+v is not in %s", anon, auth.Unauthenticated)
	}
}
