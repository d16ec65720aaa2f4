// Package rediswqtest finds what tests of the Redis front run: the
// Asperathos-style workers of the examples, a python3 with a real Redis
// client library, and a real redis-server to compare the front with.
package rediswqtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/internal/localtest"
)

// Worker is the path of examples/asperathos/rediswq-worker/worker.py.
func Worker(t testing.TB) string {
	t.Helper()
	return filepath.Join(examples(t), "rediswq-worker", "worker.py")
}

// examples is the path of examples/asperathos.
func examples(t testing.TB) string {
	t.Helper()
	root, err := localtest.Root()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "examples", "asperathos")
}

// Python returns a python3 that imports redis (Debian's python3-redis,
// which integration/scripts/ensure-tools.sh installs), failing the test without one:
// the tests need a real Redis client.
func Python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import redis").Run() == nil {
			return p
		}
	}
	t.Fatal("no python3 with the redis module: run integration/scripts/ensure-tools.sh (apt-get install python3-redis)")
	return ""
}

// Server starts a real redis-server (Debian's redis-server, which
// integration/scripts/ensure-tools.sh installs) on a free loopback port for the test's
// life, with no persistence, and returns its address. The test fails
// without one: the front's replies are compared with a real Redis.
func Server(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("no redis-server: run integration/scripts/ensure-tools.sh (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	_ = ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := Dial(addr); err == nil {
			reply, err := c.Do("PING")
			_ = c.Close()
			if err == nil && reply == "+PONG" {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Conn is a bare RESP2 connection that renders each reply as one line,
// the same for any server: +simple, -error, :int, $bulk, nil, and
// arrays as [a, b]. Tests compare a real Redis's lines with the front's.
type Conn struct {
	c net.Conn
	r *bufio.Reader
}

// Dial connects to a Redis server.
func Dial(addr string) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReader(c)}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Do sends one command and reads its reply.
func (c *Conn) Do(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.c.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		return "", err
	}
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return c.read()
}

func (c *Conn) read() (string, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', '-', ':':
		return line, nil
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "nil", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return "", err
		}
		return "$" + string(buf[:n]), nil
	case '*', '%':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "nil", err
		}
		if line[0] == '%' {
			n *= 2
		}
		parts := make([]string, n)
		for i := range parts {
			if parts[i], err = c.read(); err != nil {
				return "", err
			}
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case '_':
		return "nil", nil
	}
	return "", fmt.Errorf("unknown reply %q", line)
}

// GoWorker builds examples/asperathos/goredis-worker, a worker on the
// go-redis client (its own module), once per test binary, where sandboxed
// workers run it too, and returns the binary's path.
func GoWorker(t testing.TB) string {
	t.Helper()
	path, err := localtest.Program("goredis-worker", filepath.Join(examples(t), "goredis-worker"), ".",
		"GOWORK=off", "GOFLAGS=-mod=mod")
	if err != nil {
		t.Fatal(err)
	}
	return path
}
