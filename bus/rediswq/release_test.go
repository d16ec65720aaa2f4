package rediswq

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// A queue is closed once no connection uses it and it holds no item, also
// when a connection switched credentials (AUTH) after using it.
func TestIdleQueuesAreReleased(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	if _, err := c.DeclareJob(context.Background(), "idle", schemas.JobSpec{Mode: schemas.Streaming}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := New(Config{Open: SharedClient(c), Tick: 50 * time.Millisecond})
	bustest.Run(t, func(ctx context.Context) error { return f.Serve(ctx, ln) })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	cli := exec.Command("redis-cli", "-p", port)
	cli.Stdin = strings.NewReader("LLEN idle\nAUTH other\nLLEN idle\n")
	if out, err := cli.CombinedOutput(); err != nil || strings.Fields(string(out))[0] != "0" {
		t.Fatalf("redis-cli: %v %s", err, out)
	}
	bustest.Eventually(t, 5*time.Second, "the idle queue released", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.queues) == 0
	})
}
