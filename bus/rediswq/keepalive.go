package rediswq

import (
	"net"
	"time"
)

// A worker that vanishes without closing its connection (its pod deleted
// with its network, its machine gone) keeps its items leased for as long as
// the front takes its connection for open: their leases are extended while
// it is. TCP keepalive probes find such a connection dead. The front probes
// after 5 s of silence, every 5 s, and gives up after 3 unanswered probes,
// so the items return to their queue within about 20 s (Go's default takes
// 2.5 minutes, Redis's own 5).
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3}

// probed is a listener whose TCP connections are probed with keepAlive.
type probed struct{ net.Listener }

func (l probed) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(keepAlive) // best effort: Go's default probes remain
	}
	return c, err
}
