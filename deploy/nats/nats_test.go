// Package nats_test checks the shipped NATS server configuration by loading
// it into real nats-server instances.
package nats_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/natsauth"
)

// freePort returns a loopback TCP port nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// load parses a config file of this directory with env set, as
// nats-server -c does.
func load(t *testing.T, file string, env map[string]string) *server.Options {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	opts.NoSigs, opts.NoLog = true, true
	return opts
}

// start runs a server with opts until the test ends.
func start(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(time.Minute) {
		t.Fatalf("server %s not ready", opts.ServerName)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// startCluster starts three servers from file, each with its own name, ports
// and store, and waits until JetStream's meta group counts all three.
func startCluster(t *testing.T, file string, extra map[string]string) []*server.Server {
	t.Helper()
	clientPorts := []int{freePort(t), freePort(t), freePort(t)}
	routePorts := []int{freePort(t), freePort(t), freePort(t)}
	var servers []*server.Server
	for i := range 3 {
		env := map[string]string{
			"NATS_SERVER_NAME":  fmt.Sprintf("nats-%d", i+1),
			"NATS_HOST":         "127.0.0.1",
			"NATS_PORT":         strconv.Itoa(clientPorts[i]),
			"NATS_CLUSTER_PORT": strconv.Itoa(routePorts[i]),
			"NATS_STORE_DIR":    filepath.Join(t.TempDir(), "jetstream"),
		}
		for j, p := range routePorts {
			env[fmt.Sprintf("NATS_ROUTE_%d", j+1)] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
		}
		for k, v := range extra {
			env[k] = v
		}
		servers = append(servers, start(t, load(t, file, env)))
	}
	bustest.Eventually(t, 20*time.Second, "a meta leader seeing three JetStream servers", func() bool {
		for _, s := range servers {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == 3 {
				return true
			}
		}
		return false
	})
	return servers
}

func TestClusterConfigFormsAThreeServerJetStreamCluster(t *testing.T) {
	servers := startCluster(t, "cluster.conf", nil)
	for _, s := range servers {
		if !s.JetStreamIsClustered() {
			t.Errorf("%s: JetStream not clustered", s.Name())
		}
		if got := s.ClusterName(); got != "pace" {
			t.Errorf("%s: cluster name = %q, want pace", s.Name(), got)
		}
	}
}

func TestClusterConfigLimits(t *testing.T) {
	o := load(t, "cluster.conf", map[string]string{"NATS_SERVER_NAME": "nats-1", "NATS_HOST": "127.0.0.1",
		"NATS_PORT": "4222", "NATS_CLUSTER_PORT": "6222", "NATS_STORE_DIR": t.TempDir(),
		"NATS_ROUTE_1": "nats-route://127.0.0.1:6222", "NATS_ROUTE_2": "nats-route://127.0.0.1:6223",
		"NATS_ROUTE_3": "nats-route://127.0.0.1:6224"})
	if o.MaxPayload != 1<<20 {
		t.Errorf("max_payload = %d, want 1 MiB", o.MaxPayload)
	}
	if o.JetStreamLimits.DefaultMaxConsumers != -1 {
		t.Errorf("default_max_consumers = %d, want -1 (unlimited)", o.JetStreamLimits.DefaultMaxConsumers)
	}
}

func TestClusterConfigNamesAMissingVariable(t *testing.T) {
	t.Setenv("NATS_SERVER_NAME", "nats-1")
	_, err := server.ProcessConfigFile("cluster.conf")
	if err == nil {
		t.Fatal("config loaded without NATS_PORT and the others")
	}
	if !strings.Contains(err.Error(), "NATS_") {
		t.Errorf("err = %v, want it to name the variable", err)
	}
}

func TestProductionConfigFormsATLSClusterOfStageUsers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tlsFiles := bustest.TLS(t)
	_, issuer, err := natsauth.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NATS_TLS_CERT": tlsFiles.Cert, "NATS_TLS_KEY": tlsFiles.Key, "NATS_TLS_CA": tlsFiles.CA,
		"PACE_NATS_CALLOUT_ISSUER": issuer}
	for _, u := range users {
		env["PACE_NATS_"+strings.ToUpper(u)+"_PASSWORD"] = password(u)
	}
	servers := startCluster(t, "nats.conf", env)
	url := servers[0].ClientURL()

	admin, err := bus.Connect(ctx, url, bus.WithTLS(tlsFiles.CA, "", ""),
		bus.WithUserPassword("pace-admin", password("admin")), bus.WithConnectTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if err := admin.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	st, err := admin.JetStream().Stream(ctx, "PACE_WORK")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Replicas; got != 3 {
		t.Errorf("PACE_WORK replicas = %d on the three-server cluster, want 3", got)
	}

	refused := map[string][]bus.Option{
		// The server requires TLS; nats.go upgrades but trusts only the
		// system roots then.
		"no CA":        {bus.WithUserPassword("pace-admin", password("admin"))},
		"no password":  {bus.WithTLS(tlsFiles.CA, "", "")},
		"other CA":     {bus.WithTLS(bustest.TLS(t).CA, "", ""), bus.WithUserPassword("pace-admin", password("admin"))},
		"bad password": {bus.WithTLS(tlsFiles.CA, "", ""), bus.WithUserPassword("pace-admin", "guess")},
	}
	for name, opts := range refused {
		c, err := bus.Connect(ctx, url, append(opts, bus.WithConnectTimeout(time.Second))...)
		if err == nil {
			_ = c.Close(ctx)
			t.Errorf("%s: connected", name)
		}
	}
}
