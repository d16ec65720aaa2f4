package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/internal/leaktest"
	"github.com/pace-platform/pace/stages/gate/targets/local"
)

func TestMain(m *testing.M) {
	local.RunSandboxInit() // the sandboxed replicas' first process is this binary
	leaktest.Main(m)       // fails the package when a test leaves a goroutine behind
}

// outputs collects the lines each job's replicas write.
type outputs struct {
	mu    sync.Mutex
	lines map[string][]string
}

func (o *outputs) add(job, _, line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lines == nil {
		o.lines = map[string][]string{}
	}
	o.lines[job] = append(o.lines[job], line)
}

// report waits for the line "done" in job's output and returns the lines
// before it as key → value ("key: value" lines).
func (o *outputs) report(t *testing.T, job string) map[string]string {
	t.Helper()
	var got map[string]string
	eventually(t, job+"'s report", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		got = map[string]string{}
		for _, l := range o.lines[job] {
			if l == "done" {
				return true
			}
			k, v, _ := strings.Cut(l, ": ")
			got[k] += v
		}
		return false
	})
	return got
}

// probe is a replica that reports, as "key: value" lines, what it can see
// and do, then idles. $SECRET is a hidden directory of Pace's; Pace's
// environment has own-secret-value.
const probe = `
echo "uid: $(id -u)"
echo "processes: $(ls /proc | grep -c '^[0-9]')"
echo "secret: $(cat "$SECRET/key" 2>/dev/null)"
echo "secret dir: $(ls -A "$SECRET" 2>&1 | head -c 200)"
echo "environ: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c own-secret-value)"
echo "tmp: $(ls -A /tmp | tr '\n' ' ')"
echo "mine" > /tmp/mine && echo "tmp write: ok"
echo "unmount: $(umount "$SECRET" >/dev/null 2>&1 && echo done || echo refused)"
echo "user namespace: $(unshare -rm true 2>&1 && echo ok)"
echo "unmount in a user namespace: $(unshare -rm umount "$SECRET" >/dev/null 2>&1 && echo done || echo refused)"
echo "secret in a user namespace: $(unshare -rm cat "$SECRET/key" 2>/dev/null)"
echo "cgroup memory: $(cat /sys/fs/cgroup/memory/pace/$PACE_JOB/memory.limit_in_bytes 2>/dev/null)"
echo "cgroup cpu: $(cat /sys/fs/cgroup/cpu/pace/$PACE_JOB/cpu.cfs_quota_us 2>/dev/null)"
echo done
exec sleep 1000
`

// hostDir is a directory everyone can reach, outside the /tmp that
// sandboxes replace: under /run.
func hostDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/run", "pace-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// secretDir is a directory of Pace's holding a key, owned by uid.
func secretDir(t *testing.T, uid int) string {
	t.Helper()
	dir := filepath.Join(hostDir(t), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("the-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "key")} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sandboxedRuntime runs a sandboxed runtime hiding secret, whose replicas'
// lines go to out.
func sandboxedRuntime(t *testing.T, secret string, out *outputs) *local.Runtime {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startRuntime(t, local.Config{NATSURL: "nats://127.0.0.1:1", Grace: time.Second, Binary: exe,
		Sandbox: &local.Sandbox{Hide: []string{secret}}, Output: out.add})
}

func probeWorker(job, secret string) local.Worker {
	return local.Worker{Job: job, Command: []string{"sh", "-c", probe}, Env: map[string]string{"SECRET": secret},
		Limits: local.Limits{MilliCPU: 500, MemoryBytes: 64 << 20}}
}

// As root, each job runs as a user of its own in a cgroup bounded by its
// limits; its replicas see no other process, none of Pace's secrets (its
// hidden directory, its environment), a private /tmp, and cannot undo the
// mounts that hide them.
func TestSandboxIsolatesJobsFromPaceAndEachOther(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (TestSandboxUnprivileged covers an unprivileged Pace)")
	}
	t.Setenv("PACE_TEST_SECRET", "own-secret-value")
	secret := secretDir(t, 0)
	var out outputs
	r := sandboxedRuntime(t, secret, &out)
	for _, job := range []string{"alice", "bob"} {
		if _, err := r.Scale(context.Background(), probeWorker(job, secret), 1); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob := out.report(t, "alice"), out.report(t, "bob")
	for job, got := range map[string]map[string]string{"alice": alice, "bob": bob} {
		uid, err := strconv.Atoi(got["uid"])
		if err != nil || uid < 61184 || uid > 65519 {
			t.Errorf("%s: uid %q, want one of the job users' range 61184-65519", job, got["uid"])
		}
		want := map[string]string{"secret": "", "environ": "0", "tmp": "", "tmp write": "ok", "unmount": "refused",
			"user namespace": "ok", "unmount in a user namespace": "refused", "secret in a user namespace": "", "cgroup memory": strconv.Itoa(64 << 20), "cgroup cpu": "50000"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", job, k, got[k], v)
			}
		}
		if n, _ := strconv.Atoi(got["processes"]); n < 1 || n > 5 { // init, sh, a subshell, ls and grep at most
			t.Errorf("%s: sees %s processes in /proc, want only its sandbox's", job, got["processes"])
		}
		if !strings.Contains(got["secret dir"], "Permission denied") {
			t.Errorf("%s: listing Pace's hidden directory said %q, want Permission denied", job, got["secret dir"])
		}
	}
	if alice["uid"] == bob["uid"] {
		t.Errorf("alice and bob both run as uid %s, want a user per job", alice["uid"])
	}
	if _, err := os.Stat("/tmp/mine"); err == nil {
		t.Error("a replica's /tmp/mine is in the host's /tmp, want a private /tmp")
	}
	// The job's cgroup goes with its last replica, and its uid is free.
	r.Terminate("alice")
	eventually(t, "alice's cgroup removed", func() bool {
		_, err := os.Stat("/sys/fs/cgroup/memory/pace/alice")
		return os.IsNotExist(err)
	})
}

// A replica's program may be Pace's own binary, which lives where the job's
// user has no path to (go run and go test build it under root's 0700
// directories): the sandbox runs it from the file Pace opened. Here the
// binary is a script in such a directory.
func TestSandboxRunsPacesBinaryFromAPrivateDirectory(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pace") // a 0700 directory of root's
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"ran as $(id -u): $1 $2\"\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out outputs
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := startRuntime(t, local.Config{NATSURL: "nats://127.0.0.1:1", Grace: time.Second, Binary: bin,
		Sandbox: &local.Sandbox{Init: exe}, Output: out.add})
	if _, err := r.Scale(context.Background(), local.Worker{Job: "j1", Exec: "cat"}, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the binary's own output", func() bool {
		out.mu.Lock()
		defer out.mu.Unlock()
		for _, l := range out.lines["j1"] {
			if strings.HasPrefix(l, "ran as 6") && strings.HasSuffix(l, ": worker j1") {
				return true
			}
		}
		return false
	})
}

// An unprivileged Pace sandboxes its replicas in user namespaces: they
// run as Pace's user but see no other process and an empty directory in
// place of Pace's data, and cannot unmount it. The test runs its own binary
// again as nobody.
func TestSandboxUnprivileged(t *testing.T) {
	if os.Getenv("PACE_SANDBOX_TEST_NOBODY") != "" {
		unprivileged(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test starts itself as nobody, which needs root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := hostDir(t)
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "local.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := secretDir(t, 65534)
	cmd := exec.Command(bin, "-test.run", "^TestSandboxUnprivileged$", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PACE_SANDBOX_TEST_NOBODY=1", "SECRET=" + secret, "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "--- PASS") {
		t.Fatalf("as nobody: %v\n%s", err, got)
	}
}

func unprivileged(t *testing.T) {
	t.Setenv("PACE_TEST_SECRET", "own-secret-value")
	secret := os.Getenv("SECRET")
	if b, err := os.ReadFile(filepath.Join(secret, "key")); err != nil || string(b) != "the-key" {
		t.Fatalf("nobody reads its own key: %q %v", b, err)
	}
	var out outputs
	r := sandboxedRuntime(t, secret, &out)
	if got := r.Isolation(); got != local.IsolationUserNS {
		t.Fatalf("isolation = %q, want %q", got, local.IsolationUserNS)
	}
	if _, err := r.Scale(context.Background(), probeWorker("j1", secret), 1); err != nil {
		t.Fatal(err)
	}
	got := out.report(t, "j1")
	want := map[string]string{"uid": "65534", "secret": "", "environ": "0", "tmp": "", "tmp write": "ok", "unmount": "refused",
		"user namespace": "ok", "unmount in a user namespace": "refused", "secret in a user namespace": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if n, _ := strconv.Atoi(got["processes"]); n < 1 || n > 5 {
		t.Errorf("sees %s processes in /proc, want only its sandbox's", got["processes"])
	}
	fmt.Println("report:", got)
}
