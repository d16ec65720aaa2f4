package bus_test

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

func TestPublishOverMaxPayloadFailsNamingTheSizes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), MaxPayload: 4096, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(time.Minute) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	c, err := bus.Connect(ctx, s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 5000)
	for name, publish := range map[string]func() error{
		"push":   func() error { return c.PushItems(ctx, "big", bus.Items(big)) },
		"result": func() error { return c.PublishResult(ctx, &schemas.Result{Job: "big", ItemID: "i", Output: big}) },
	} {
		err := publish()
		if !errors.Is(err, nats.ErrMaxPayload) {
			t.Fatalf("%s: err = %v, want ErrMaxPayload", name, err)
		}
		if !strings.Contains(err.Error(), "max_payload of 4096 bytes") || !strings.Contains(err.Error(), " bytes exceeds") {
			t.Errorf("%s: err = %v, want the sizes", name, err)
		}
	}
	// Smaller messages still go through on the same connection.
	if err := c.PushItems(ctx, "big", bus.Items("small")); err != nil {
		t.Fatal(err)
	}
}

func TestRedactURLs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":           "nats://127.0.0.1:4222",
		"nats://u:pw@h:4222":              "nats://u:xxxxx@h:4222",
		"tls://a:4222,nats://u:pw@b:4222": "tls://a:4222,nats://u:xxxxx@b:4222",
		"nats://s3cr3t-token@h:4222":      "nats://xxxxx@h:4222",
		"u:pw@h:4222":                     "xxxxx@h:4222",
		"nats://u:p@ss@h:4222":            "nats://u:xxxxx@h:4222",
		"":                                "",
	} {
		if got := bus.RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNewWrapsAnEstablishedConnection: a client made by New on the user's
// own connection provisions and pushes like one made by Connect, its
// results are stored, and closing it drains the connection.
func TestNewWrapsAnEstablishedConnection(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	nc, err := nats.Connect(bustest.Server(t).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	c, err := bus.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := c.PushItems(ctx, "wrapped", bus.Items("a")); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishResult(ctx, &schemas.Result{Job: "wrapped", ItemID: "a", Output: "A"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Outputs().StoredResults(ctx, "wrapped")
	if err != nil || len(got) != 1 || got[0].Output != "A" {
		t.Fatalf("stored results %v, %v; want the one result A", got, err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !nc.IsClosed() {
		t.Error("Close left the wrapped connection open")
	}
}

// TestClosingAClientEndsItsWork: the watch of the jobs bucket a listing
// starts ends with the client, whether or not the connection's end reaches
// it first.
func TestClosingAClientEndsItsWork(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, err := bus.Connect(ctx, bustest.Server(t).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	// Whether a goroutine of this test's client watches the bucket.
	watching := func() bool {
		buf := make([]byte, 8<<20)
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*Client).watchJobs"))
	}
	if _, err := c.Jobs().List(ctx); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, "the jobs bucket's watch", watching)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, "the watch ends with the client", func() bool { return !watching() })
}
