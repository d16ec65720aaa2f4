package bus_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
)

const secret = "s3cret-Pa55"

// authServer starts a JetStream server that requires TLS and either the user
// pace with the secret password or the nkey written to the returned seed file.
func authServer(t *testing.T, tlsFiles bustest.TLSFiles) (url, seedFile string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile = filepath.Join(t.TempDir(), "pace.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: tlsFiles.Cert, KeyFile: tlsFiles.Key, CaFile: tlsFiles.CA})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		TLS: true, TLSConfig: tc, TLSTimeout: 2,
		Users:  []*server.User{{Username: "pace", Password: secret}},
		Nkeys:  []*server.NkeyUser{{Nkey: pub}},
		NoSigs: true, NoLog: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(time.Minute) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL(), seedFile
}

func TestConnectWithTLSAndEachAuthMode(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	tlsFiles := bustest.TLS(t)
	url, seedFile := authServer(t, tlsFiles)
	tlsOpt := bus.WithTLS(tlsFiles.CA, "", "")
	for name, auth := range map[string]bus.Option{
		"user/password": bus.WithUserPassword("pace", secret),
		"nkey":          bus.WithNkeyFile(seedFile),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := bus.Connect(ctx, url, tlsOpt, auth, bus.WithConnectTimeout(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close(ctx) }()
			if err := c.Provision(ctx, bus.Limits{}); err != nil {
				t.Fatal(err)
			}
			if !c.Conn().TLSRequired() {
				t.Error("connection is not TLS")
			}
		})
	}
}

func TestConnectRefusedFailsAtOnceWithoutTheSecret(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	tlsFiles := bustest.TLS(t)
	url, _ := authServer(t, tlsFiles)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cases := map[string][]bus.Option{
		"wrong password": {bus.WithTLS(tlsFiles.CA, "", ""), bus.WithUserPassword("pace", "wrong-"+secret)},
		"no credentials": {bus.WithTLS(tlsFiles.CA, "", "")},
		"untrusted CA":   {bus.WithTLS(bustest.TLS(t).CA, "", ""), bus.WithUserPassword("pace", secret)},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			// A refusal is final: no retries until the (long) connect timeout.
			_, err := bus.Connect(ctx, url, append(opts, bus.WithLogger(log), bus.WithConnectTimeout(time.Minute))...)
			if err == nil {
				t.Fatal("connected")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
	if out := logs.String(); strings.Contains(out, secret) || strings.Contains(out, "retrying") {
		t.Errorf("logs show the password or a retry of a refused connection:\n%s", out)
	}
}

func TestConnectRedactsCredentialsInURLs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	addr := freeAddr(t)
	for _, url := range []string{
		"nats://pace:" + secret + "@" + addr,
		"nats://" + addr + ",tls://pace:" + secret + "@" + addr,
		"nats://" + secret + "@" + addr, // a token
		"pace:" + secret + "@" + addr,   // no scheme
	} {
		_, err := bus.Connect(ctx, url, bus.WithLogger(log), bus.WithConnectTimeout(300*time.Millisecond))
		if err == nil {
			t.Fatalf("connected to a closed port")
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), addr) {
			t.Errorf("error = %q, want the address without the secret", err)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "nats unreachable") {
		t.Fatalf("no retry logged:\n%s", out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("logs show the secret:\n%s", out)
	}
}

func TestAuthOptionsExcludeEachOther(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	seed := filepath.Join(t.TempDir(), "missing.nk")
	cases := map[string][]bus.Option{
		"creds and user":   {bus.WithCredentials("pace.creds"), bus.WithUserPassword("pace", secret)},
		"nkey and creds":   {bus.WithNkeyFile(seed), bus.WithCredentials("pace.creds")},
		"user without pwd": {bus.WithUserPassword("pace", "")},
		"missing nkey":     {bus.WithNkeyFile(seed)},
		"empty nkey":       {bus.WithNkeyFile("")},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := bus.Connect(ctx, "nats://127.0.0.1:1", opts...)
			if !errors.Is(err, bus.ErrInvalidOption) {
				t.Fatalf("err = %v, want ErrInvalidOption", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
