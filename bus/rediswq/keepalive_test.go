package rediswq

import (
	"net"
	"syscall"
	"testing"
)

// TestConnectionsAreProbedSoon: a connection the front accepts probes its
// peer after 5 s of silence, every 5 s, 3 times, so that a vanished worker's
// items return within about 20 s.
func TestConnectionsAreProbedSoon(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := probed{ln}
	defer l.Close() //nolint:errcheck // test listener
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close() //nolint:errcheck // test connection
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() //nolint:errcheck // test connection
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	opts := []struct {
		name       string
		level, opt int
	}{{"SO_KEEPALIVE", syscall.SOL_SOCKET, syscall.SO_KEEPALIVE}, {"TCP_KEEPIDLE", syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE},
		{"TCP_KEEPINTVL", syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL}, {"TCP_KEEPCNT", syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT}}
	if cerr := raw.Control(func(fd uintptr) {
		for _, o := range opts {
			v, err := syscall.GetsockoptInt(int(fd), o.level, o.opt)
			if err != nil {
				t.Errorf("%s: %v", o.name, err)
			}
			got[o.name] = v
		}
	}); cerr != nil {
		t.Fatal(cerr)
	}
	want := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 5, "TCP_KEEPINTVL": 5, "TCP_KEEPCNT": 3}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
}
