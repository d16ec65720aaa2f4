package apfhttp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/internal/auth"
)

// bodyServer serves, behind auth.Middleware, ReadBody(l) and the APF filter
// with one seat for every caller (oneSeat, also for anonymous callers), a
// handler echoing the body. Each request's X-Test header is sent on arrived
// before its body is read, and handled is sent the path of each request the
// handler gets.
type bodyServer struct {
	*httptest.Server
	arrived chan string
	handled chan string
}

func newBodyServer(t *testing.T, l apfhttp.BodyLimits, handler http.HandlerFunc) *bodyServer {
	t.Helper()
	objs := oneSeat + `
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: strangers}
spec:
  matchingPrecedence: 501
  priorityLevelConfiguration: {name: tiny}
  rules:
  - subjects: [{kind: Group, group: {name: "system:unauthenticated"}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
`
	gate, _ := apftest.NewGate(t, eventclock.Real{WithDelayedExecution: clock.RealClock{}}, tinyServer, objs)
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	s := &bodyServer{arrived: make(chan string, 100), handled: make(chan string, 100)}
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				t.Errorf("handler read: %v", err)
			}
			s.handled <- r.URL.Path
			_, _ = w.Write(b)
		}
	}
	inner := apfhttp.ReadBody(l)(apfhttp.Middleware(gate, apfhttp.Resources(apfhttp.PaceGroup, "submissions"))(handler))
	arrive := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if x := r.Header.Get("X-Test"); x != "" {
			s.arrived <- x
		}
		inner.ServeHTTP(w, r)
	})
	s.Server = httptest.NewServer(auth.Middleware(tf)(arrive))
	t.Cleanup(s.Close)
	return s
}

// slowPost opens a connection and sends a POST whose headers announce
// length bytes of body but whose body stops after a few, as a slow client
// does, and waits for the server to have read its headers.
func (s *bodyServer) slowPost(t *testing.T, name, token string, length int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := fmt.Fprintf(conn, "POST /submissions HTTP/1.1\r\nHost: pace\r\nX-Test: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"na", name, auth, length); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-s.arrived:
		if got != name {
			t.Fatalf("arrived %s, want %s", got, name)
		}
	case <-time.After(apftest.Patience):
		t.Fatalf("%s: headers not read within %s", name, apftest.Patience)
	}
	return conn
}

// response reads the HTTP response on conn, waiting at most apftest.Patience, and
// requires the server to close the connection after it (it must not wait
// for the rest of a body that is not coming).
func response(t *testing.T, conn net.Conn) (int, string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(apftest.Patience))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the response: %d bytes, %v; want the server to close the connection", n, err)
	}
	return resp.StatusCode, string(b)
}

func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: apftest.Patience}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // test
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A client that sends its body slowly holds no seat: the level's only one
// serves another caller meanwhile, and the slow request is answered 408
// once its time is up, never reaching the handler.
func TestReadBodySlowClientHoldsNoSeat(t *testing.T) {
	s := newBodyServer(t, apfhttp.BodyLimits{MaxBytes: 1 << 20, Timeout: 200 * time.Millisecond}, nil)
	slow := s.slowPost(t, "slow", "alice-token", 100)
	if code, body := post(t, s.URL+"/submissions", "alice-token", `{"name":"x"}`); code != http.StatusOK || body != `{"name":"x"}` {
		t.Errorf("a request beside the slow one: %d %q, want 200 and its body echoed", code, body)
	}
	// response checks that the server closed the connection after it.
	if code, body := response(t, slow); code != http.StatusRequestTimeout || !strings.Contains(body, `"error_code":408`) {
		t.Errorf("slow body: %d %q, want 408", code, body)
	}
	if got := <-s.handled; got != "/submissions" || len(s.handled) != 0 {
		t.Errorf("handled %s and %d more, want the fast request alone", got, len(s.handled))
	}
}

func TestReadBodyTooLarge(t *testing.T) {
	s := newBodyServer(t, apfhttp.BodyLimits{MaxBytes: 16, Timeout: time.Minute}, nil)
	// Announced: refused before reading.
	conn := s.slowPost(t, "announced", "alice-token", 17)
	if code, body := response(t, conn); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than 16 bytes") {
		t.Errorf("Content-Length 17: %d %s, want 413", code, body)
	}
	// Chunked: refused once past the limit.
	req, _ := http.NewRequest("POST", s.URL+"/submissions", io.MultiReader(strings.NewReader(strings.Repeat("x", 17))))
	req.ContentLength = -1
	resp, err := (&http.Client{Timeout: apftest.Patience}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("17 chunked bytes: %d, want 413", resp.StatusCode)
	}
	if code, _ := post(t, s.URL+"/submissions", "", strings.Repeat("x", 16)); code != http.StatusOK {
		t.Errorf("16 bytes: %d, want 200", code)
	}
	if len(s.handled) != 1 {
		t.Errorf("%d requests handled, want the one within the limit", len(s.handled))
	}
}

// Anonymous callers may have MaxAnonymous bodies read at once; callers
// with credentials are not counted.
func TestReadBodyBoundsAnonymousReads(t *testing.T) {
	s := newBodyServer(t, apfhttp.BodyLimits{MaxBytes: 1 << 20, Timeout: time.Minute, MaxAnonymous: 1}, nil)
	// The two race for the one anonymous read (the first to arrive may be
	// the second counted, on a busy machine): the loser is answered 429 at
	// once, the winner keeps reading until it is closed.
	conns := []net.Conn{s.slowPost(t, "anonymous", "", 100), s.slowPost(t, "anonymous too", "", 100)}
	type answer struct {
		i    int
		code int
		body string
		err  error
	}
	answers := make(chan answer, len(conns))
	for i, c := range conns {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(apftest.Patience))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers <- answer{i: i, err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			answers <- answer{i: i, code: resp.StatusCode, body: string(b)}
		}()
	}
	first := <-answers
	if first.err != nil || first.code != http.StatusTooManyRequests || !strings.Contains(first.body, "without credentials") {
		t.Fatalf("first answer to two anonymous bodies: %d %s %v, want 429", first.code, first.body, first.err)
	}
	slow := conns[1-first.i]
	if code, _ := post(t, s.URL+"/submissions", "alice-token", `{}`); code != http.StatusOK {
		t.Errorf("alice beside it: %d, want 200", code)
	}
	_ = slow.Close() // its read ends, and so does its count
	for deadline := time.Now().Add(apftest.Patience); ; time.Sleep(5 * time.Millisecond) {
		if code, _ := post(t, s.URL+"/submissions", "", `{}`); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("anonymous bodies still refused after the slow one went away")
		}
	}
}

// The read deadline is gone once the body is in: a response that streams
// for longer than the body's timeout keeps its request context.
func TestReadBodyDeadlineEndsWithTheBody(t *testing.T) {
	const timeout = 50 * time.Millisecond
	s := newBodyServer(t, apfhttp.BodyLimits{MaxBytes: 1 << 20, Timeout: timeout}, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			_, _ = io.WriteString(w, "cancelled")
		case <-time.After(20 * timeout): // the deadline, had it stayed, would have passed 19 times
			_, _ = io.WriteString(w, "done")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), apftest.Patience)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/submissions", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // test
	if b, _ := io.ReadAll(resp.Body); string(b) != "done" {
		t.Errorf("streamed response: %q, want done", b)
	}
}
