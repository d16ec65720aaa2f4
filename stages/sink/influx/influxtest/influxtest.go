// Package influxtest starts a real InfluxDB 1.8.10 for tests: built from the
// Go module proxy by integration/scripts/ensure-influxd.sh (once per machine, about two
// minutes), on free loopback ports with its data in a temporary directory,
// Flux off for a fast start, so reads use InfluxQL over /query. A failed
// build fails the test; it never skips.
package influxtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a running influxd with a database named "pace".
type Server struct {
	t             testing.TB
	bin, dir      string
	httpAddr, rpc string
	cmd           *exec.Cmd
	exited        chan struct{}
	URL           string
}

// repoRoot is the directory holding go.mod.
func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// Binary builds influxd once per machine (about 2 minutes) or reuses
// it; a failed build fails the test, it never skips.
func Binary(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot(t), "integration", "scripts", "ensure-influxd.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("integration/scripts/ensure-influxd.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() //nolint:errcheck // only its address was needed
	return ln.Addr().String()
}

// Start starts a server with database "pace" and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	d := &Server{t: t, bin: Binary(t), dir: t.TempDir(), httpAddr: freeAddr(t), rpc: freeAddr(t)}
	d.URL = "http://" + d.httpAddr
	d.Start()
	t.Cleanup(d.Stop)
	d.Query("CREATE DATABASE pace")
	return d
}

// Start runs the server (again, on the same ports and data) and waits for /ping.
func (d *Server) Start() {
	d.t.Helper()
	log, err := os.OpenFile(filepath.Join(d.dir, "influxd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	d.cmd = exec.Command(d.bin, "run", "-config", "/dev/null")
	d.cmd.Env = append(os.Environ(),
		"INFLUXDB_HTTP_BIND_ADDRESS="+d.httpAddr, "INFLUXDB_BIND_ADDRESS="+d.rpc,
		"INFLUXDB_META_DIR="+filepath.Join(d.dir, "meta"), "INFLUXDB_DATA_DIR="+filepath.Join(d.dir, "data"),
		"INFLUXDB_DATA_WAL_DIR="+filepath.Join(d.dir, "wal"), "INFLUXDB_HTTP_FLUX_ENABLED=false",
		"INFLUXDB_REPORTING_DISABLED=true", "INFLUXDB_MONITOR_STORE_ENABLED=false",
		"INFLUXDB_HTTP_LOG_ENABLED=false", "INFLUXDB_DATA_QUERY_LOG_ENABLED=false")
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		_ = log.Close()
		close(exited)
	}(d.cmd, d.exited)
	deadline := time.Now().Add(2 * time.Minute) // the answer ends the wait; a slow machine must not fail it
	for {
		resp, err := http.Get(d.URL + "/ping")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return
			}
		}
		select {
		case <-d.exited:
			b, _ := os.ReadFile(filepath.Join(d.dir, "influxd.log"))
			d.t.Fatalf("influxd exited at start:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatal("influxd did not answer /ping within 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop interrupts the server and waits for it to exit.
func (d *Server) Stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.cmd = nil
}

// Query runs an InfluxQL statement on database pace and returns the rows of
// its first series.
func (d *Server) Query(q string) [][]any {
	d.t.Helper()
	resp, err := http.PostForm(d.URL+"/query", url.Values{"db": {"pace"}, "q": {q}, "epoch": {"ns"}})
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // closing a response body
	var r struct {
		Results []struct {
			Error  string `json:"error"`
			Series []struct {
				Values [][]any `json:"values"`
			} `json:"series"`
		} `json:"results"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		d.t.Fatalf("query %q: %v", q, err)
	}
	if len(r.Results) == 0 {
		return nil
	}
	if r.Results[0].Error != "" {
		d.t.Fatalf("query %q: %s", q, r.Results[0].Error)
	}
	if len(r.Results[0].Series) == 0 {
		return nil
	}
	return r.Results[0].Series[0].Values
}

// Count returns count(value) of a measurement for a job.
func (d *Server) Count(measurement, job string) int {
	d.t.Helper()
	rows := d.Query(fmt.Sprintf(`SELECT count("value") FROM %q WHERE "job" = '%s'`, measurement, job))
	if len(rows) == 0 {
		return 0
	}
	n, _ := rows[0][1].(json.Number).Int64()
	return int(n)
}
