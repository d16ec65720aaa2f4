package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NATSCluster is a cluster of real nats-server processes on loopback, each
// with its own JetStream store, all routed to each other.
type NATSCluster struct {
	// Servers are the nats-server processes, n1, n2, n3…
	Servers []*Proc
	client  []string // client URL per server
	monitor []string // monitoring base URL per server
}

// StartNATSCluster starts n servers from conf, the shipped
// deploy/nats/cluster.conf, each with its own name, loopback ports and store
// under dir given through the environment the file reads, besides env. Call
// WaitHealthy before using it.
func StartNATSCluster(t testing.TB, g *Group, bin, conf, dir string, n int, env ...string) *NATSCluster {
	t.Helper()
	c := &NATSCluster{}
	ports := make([][3]int, n) // client, cluster, monitoring
	var routes []string
	for i := range ports {
		for j := range ports[i] {
			ports[i][j] = freePort(t)
		}
		routes = append(routes, fmt.Sprintf("NATS_ROUTE_%d=nats-route://127.0.0.1:%d", i+1, ports[i][1]))
	}
	for i, p := range ports {
		name := fmt.Sprintf("n%d", i+1)
		env := append(append([]string{"NATS_SERVER_NAME=" + name, "NATS_HOST=127.0.0.1",
			"NATS_PORT=" + strconv.Itoa(p[0]), "NATS_CLUSTER_PORT=" + strconv.Itoa(p[1]),
			"NATS_STORE_DIR=" + filepath.Join(dir, name+"-store")}, routes...), env...)
		proc := g.Add("nats-"+name, bin, []string{"-c", conf, "-m", strconv.Itoa(p[2])}, env...).Supervise()
		g.Start(proc)
		c.Servers = append(c.Servers, proc)
		c.client = append(c.client, fmt.Sprintf("nats://127.0.0.1:%d", p[0]))
		c.monitor = append(c.monitor, fmt.Sprintf("http://127.0.0.1:%d", p[2]))
	}
	return c
}

// URL lists every server's client URL, comma-separated, as NATS clients
// (and Pace's --nats flag) accept it.
func (c *NATSCluster) URL() string { return strings.Join(c.client, ",") }

// WaitHealthy waits until every running server reports JetStream healthy
// (/healthz: the meta leader is known and its streams are current).
func (c *NATSCluster) WaitHealthy(ctx context.Context) error {
	for i, s := range c.Servers {
		if !s.Running() {
			continue
		}
		if err := waitHealthz(ctx, c.monitor[i]); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	return nil
}

// WaitServerHealthy waits until server i reports JetStream healthy.
func (c *NATSCluster) WaitServerHealthy(ctx context.Context, i int) error {
	if err := waitHealthz(ctx, c.monitor[i]); err != nil {
		return fmt.Errorf("%s: %w", c.Servers[i].Name, err)
	}
	return nil
}

func waitHealthz(ctx context.Context, base string) error {
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy (%s): %w", last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck // only the port number is needed
	return l.Addr().(*net.TCPAddr).Port
}
