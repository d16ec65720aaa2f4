package httpserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
)

// TestServeShutsDownGracefully: a request in flight when the context ends
// gets its answer, Serve returns nil, and the listener is closed.
func TestServeShutsDownGracefully(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inFlight, finish := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(inFlight)
		<-finish
		_, _ = io.WriteString(w, "done")
	})
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, h, nil, slog.New(slog.DiscardHandler)) }()

	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close() //nolint:errcheck // test
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	<-inFlight
	cancel()
	close(finish)
	if got := <-answer; got != "done" {
		t.Errorf("request in flight at shutdown: %q, want done", got)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after shutdown: %v", err)
	}
	if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
		_ = resp.Body.Close()
		t.Error("the listener still answers after shutdown")
	}
}
