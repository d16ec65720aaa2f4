package bustest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pace-platform/pace/bus"
)

// Nodes is a running cluster of embedded NATS servers with JetStream, made
// by Cluster. Its methods are safe for concurrent use.
type Nodes struct {
	t    testing.TB
	mu   sync.Mutex // guards the slices' elements
	opts []*server.Options
	srvs []*server.Server // nil while a server is stopped
}

// Cluster starts n servers named nats-1…nats-n on loopback, each with its own
// JetStream store in a temporary directory and routes to the others, waits
// until JetStream's meta group counts all n, and stops them when the test
// ends.
func Cluster(t testing.TB, n int) *Nodes {
	t.Helper()
	c := &Nodes{t: t, opts: make([]*server.Options, n), srvs: make([]*server.Server, n)}
	// The stores are made first so that the servers stop before their
	// directories are removed (cleanups run last-registered first).
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	t.Cleanup(func() {
		for i := range n {
			c.Stop(i)
		}
	})
	var routes []string
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("nats-%d", i+1), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: dirs[i],
			JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 1 << 30,
			JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1},
			Cluster:         server.ClusterOpts{Name: "pace", Host: "127.0.0.1", Port: server.RANDOM_PORT},
			Routes:          server.RoutesFromStr(strings.Join(routes, ",")),
			NoSigs:          true, NoLog: true,
		}
		s := c.start(o.Clone())
		// A restart reuses the ports the first start picked and routes to
		// every other server.
		o.Port, o.Cluster.Port = s.Addr().(*net.TCPAddr).Port, s.ClusterAddr().Port
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.Cluster.Port))
		c.opts[i], c.srvs[i] = o, s
	}
	for i, o := range c.opts {
		o.Routes = server.RoutesFromStr(strings.Join(append(routes[:i:i], routes[i+1:]...), ","))
	}
	c.waitReady(n)
	return c
}

func (c *Nodes) start(o *server.Options) *server.Server {
	c.t.Helper()
	s, err := server.NewServer(o)
	if err != nil {
		c.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(time.Minute) {
		s.Shutdown()
		c.t.Fatalf("nats server %s not ready", o.ServerName)
	}
	return s
}

// waitReady waits until some server leads a meta group of want JetStream
// servers and every running server is current with it.
func (c *Nodes) waitReady(want int) {
	c.t.Helper()
	Eventually(c.t, 30*time.Second, fmt.Sprintf("a JetStream meta group of %d current servers", want), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		led := false
		for _, s := range c.srvs {
			if s == nil {
				continue
			}
			if !s.JetStreamIsCurrent() {
				return false
			}
			led = led || (s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) >= want)
		}
		return led
	})
}

// URLs returns the client URLs of all servers, comma-separated, as
// bus.Connect and nats.Connect take them.
func (c *Nodes) URLs() string {
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return strings.Join(urls, ",")
}

// Client connects to every server of the cluster, provisions the bus and
// closes the client when the test ends.
func (c *Nodes) Client(opts ...bus.Option) *bus.Client {
	c.t.Helper()
	return provisioned(c.t, c.URLs(), opts)
}

// URL returns the client URL of server i (counting from 0).
func (c *Nodes) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port) }

// Stop shuts server i down and waits for it; stopping a stopped server does
// nothing.
func (c *Nodes) Stop(i int) {
	c.mu.Lock()
	s := c.srvs[i]
	c.srvs[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Restart starts the stopped server i again on its ports and store, and
// waits until it is current with the meta group again.
func (c *Nodes) Restart(i int) {
	c.t.Helper()
	c.mu.Lock()
	running := c.srvs[i] != nil
	c.mu.Unlock()
	if running {
		c.t.Fatalf("restart nats-%d: still running", i+1)
	}
	s := c.start(c.opts[i].Clone())
	c.mu.Lock()
	c.srvs[i] = s
	c.mu.Unlock()
	c.waitReady(len(c.opts))
}
