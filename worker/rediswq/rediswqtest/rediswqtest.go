// Package rediswqtest finds what tests of the Redis front run: the
// Asperathos-style worker of the examples and a python3 with a real Redis
// client library.
package rediswqtest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Worker is the path of examples/asperathos/rediswq-worker/worker.py.
func Worker() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "asperathos", "rediswq-worker", "worker.py")
}

// Python returns a python3 that imports redis (Debian's python3-redis,
// which scripts/ensure-tools.sh installs), failing the test without one:
// the tests need a real Redis client.
func Python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import redis").Run() == nil {
			return p
		}
	}
	t.Fatal("no python3 with the redis module: run scripts/ensure-tools.sh (apt-get install python3-redis)")
	return ""
}
