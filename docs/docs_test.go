package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/internal/localtest"
)

// A fenced block opened with "```sh" runs against the live pace up. One that
// cannot is marked "```sh skip=REASON" with one of these reasons; any other
// info string fails the test, so that every shell block is either run or
// says why not.
var skipReasons = map[string]string{
	"kubernetes": "needs a Kubernetes cluster",
	"cluster":    "needs several machines or a NATS cluster",
	"docker":     "needs a container engine",
	"server":     "starts a long-running server of its own (pace up, pace stage, a proxy)",
	"dev":        "a development command that CI runs itself (the test suite, benchmarks, fuzzing, chaos)",
}

// block is one shell block of a page.
type block struct {
	file string
	line int    // of the opening fence
	skip string // "" when the block runs
	body string
}

// blocks returns the shell blocks of a Markdown page.
func blocks(t *testing.T, root, name string) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // read only
	var out []block
	var cur *block
	var body strings.Builder
	var indent string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.TrimSpace(line) // a block in a list item is indented
		switch {
		case cur == nil && strings.HasPrefix(fence, "```sh"):
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			info := strings.Fields(strings.TrimPrefix(fence, "```"))
			cur = &block{file: name, line: n}
			body.Reset()
			for _, word := range info[1:] {
				reason, ok := strings.CutPrefix(word, "skip=")
				if _, known := skipReasons[reason]; !ok || !known {
					t.Errorf("%s:%d: info string %q: want ```sh, or ```sh skip=REASON with REASON one of %v", name, n, line, keys(skipReasons))
				}
				cur.skip = reason
			}
		case cur != nil && strings.HasPrefix(fence, "```"):
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(strings.TrimPrefix(line, indent) + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Errorf("%s:%d: unterminated code block", name, cur.line)
	}
	return out
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestDocumentedCommandsRun runs the shell blocks of README.md and
// docs/*.md, the pages at once, each against a live 'pace up' of its own on
// free ports, as a reader starts one: a page's blocks in order, in one bash
// with -euo pipefail in a copy of the repository's tracked files (what a
// clone holds), so a variable set by one block is seen by the next and
// files the commands write stay out of the tree; with pace and the NATS CLI
// on PATH, the nats.js packages in examples/clients/node/node_modules, API,
// AUTH, TOKEN and OTHER_TOKEN set, and the default addresses
// (localhost:8080, 127.0.0.1:4222) pointing at the page's pace up.
func TestDocumentedCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pace up and runs every documented command")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"README.md"}
	for _, p := range pages {
		names = append(names, filepath.Join("docs", filepath.Base(p)))
	}
	var scripts []block // one per page: its runnable blocks
	for _, name := range names {
		var script strings.Builder
		for _, b := range blocks(t, root, name) {
			if b.skip != "" {
				continue
			}
			fmt.Fprintf(&script, "echo '### %s:%d' >&2\n%s", b.file, b.line, b.body)
		}
		if script.Len() > 0 {
			scripts = append(scripts, block{file: name, body: script.String()})
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	clients := installedClients(t, root)
	tree := copyTree(t, root)
	// ESM imports ignore NODE_PATH: the examples find their packages in a
	// node_modules beside them.
	if err := os.Symlink(clients.nodeModules, filepath.Join(tree, nodeExamples, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		t.Run(filepath.Base(s.file), func(t *testing.T) {
			t.Parallel() // the pages share no file; each has its pace up
			up := startPace(t, tree, clients.bin)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			body := strings.NewReplacer("localhost:8080", up.http, "127.0.0.1:8080", up.http,
				"localhost:4222", up.nats, "127.0.0.1:4222", up.nats).Replace(s.body)
			cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+body)
			cmd.Dir = tree
			cmd.Env = up.env
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // background jobs end with the page
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if err != nil {
				t.Fatalf("%s: %v; the last '###' line names the failing block:\n%s", s.file, err, tail(out.String(), 60))
			}
			t.Logf("%s: ok\n%s", s.file, tail(out.String(), 20))
		})
	}
}

// copyTree copies the files git tracks or would track (not ignored) under
// root into a directory and returns it: one every user may read and
// outside /tmp, as a checkout is, since the jobs' sandboxed workers run its
// examples as users of their own. The directory is the same at every run,
// so that the README's go build finds its packages in the build cache
// (compiled packages are keyed by their source's path); it is emptied
// before and after.
func copyTree(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	programs, err := localtest.Programs()
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(programs, "tree")
	if err := os.RemoveAll(tree); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tree) })
	for name := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return tree
}

// pace is a running 'pace up' and the environment the blocks run in.
type pace struct {
	http, nats string // host:port
	env        []string
}

// natsCLIVersion is the NATS CLI that docs/clients.md's blocks run, as
// integration/scripts/ensure-clients.sh installs it.
const natsCLIVersion = "v0.5.0"

// nodeExamples holds the nats.js examples, with their package-lock.json.
const nodeExamples = "examples/clients/node"

// clients are what integration/scripts/ensure-clients.sh installs for docs/clients.md.
type clients struct {
	bin         string // holds nats
	nodeModules string // examples/clients/node's packages
}

// installedClients finds the NATS CLI and the nats.js packages under
// $PACE_TOOLS (default ~/.cache/pace-tools), and fails, not skips, when they
// are missing or the packages were installed from another lock file.
func installedClients(t *testing.T, root string) clients {
	t.Helper()
	tools := os.Getenv("PACE_TOOLS")
	if tools == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		tools = filepath.Join(home, ".cache", "pace-tools")
	}
	c := clients{
		bin:         filepath.Join(tools, "natscli-"+natsCLIVersion),
		nodeModules: filepath.Join(tools, "node-clients", "node_modules"),
	}
	const fix = "run integration/scripts/test-setup.sh (task setup) once"
	if _, err := os.Stat(filepath.Join(c.bin, "nats")); err != nil {
		t.Fatalf("the NATS CLI %s, which docs/clients.md runs: %v; %s", natsCLIVersion, err, fix)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node, which docs/clients.md runs: %v; %s", err, fix)
	}
	want, err := os.ReadFile(filepath.Join(root, nodeExamples, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(tools, "node-clients", "package-lock.json"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the nats.js packages of %s are not installed from its package-lock.json (%v); %s", nodeExamples, err, fix)
	}
	if _, err := os.Stat(c.nodeModules); err != nil {
		t.Fatalf("the nats.js packages of %s: %v; %s", nodeExamples, err, fix)
	}
	return c
}

// startPace builds pace, starts 'pace up' with a token file on free ports
// and waits until it is ready; it is stopped when the test ends. The blocks
// run with pace and the directories of extra on PATH.
func startPace(t *testing.T, root string, extra ...string) *pace {
	t.Helper()
	dir := t.TempDir()
	paceBin, err := localtest.Program("pace", root, "./cmd/pace", "GOFLAGS=-buildvcs=false")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Dir(paceBin) // on the PATH of sandboxed workers too
	// An admin's token, and a tenant's who owns no job (docs/clients.md
	// shows what the bus refuses it).
	const token, other = "docs-token", "docs-other-token"
	tokens := filepath.Join(dir, "tokens.csv")
	lines := token + ",docs,1,\"pace:admins\"\n" + other + ",other,2,\n"
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &pace{http: freeAddr(t), nats: freeAddr(t)}
	cmd := exec.Command(filepath.Join(bin, "pace"), "up", "--data", filepath.Join(dir, "data"),
		"--http", p.http, "--nats-listen", p.nats, "--token-file", tokens)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("pace up's log:\n%s", tail(log.String(), 80))
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get("http://" + p.http + "/readyz")
		if err == nil {
			resp.Body.Close() //nolint:errcheck // only the status matters
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("pace up exited: %v\n%s", err, log.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("pace up not ready after 2 minutes:\n%s", log.String())
		}
	}
	p.env = append(os.Environ(),
		"PATH="+strings.Join(append([]string{bin}, append(extra, os.Getenv("PATH"))...), string(os.PathListSeparator)),
		"API=http://"+p.http, "TOKEN="+token, "OTHER_TOKEN="+other, "AUTH=Authorization: Bearer "+token,
		// The documented go build compiles as localtest.Program did (static,
		// -trimpath): it finds every package compiled and only links.
		"GOFLAGS=-buildvcs=false -trimpath", "CGO_ENABLED=0", "PACE_API=http://"+p.http, "PACE_NATS_URL=nats://"+p.nats, "PACE_TOKEN="+token)
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() //nolint:errcheck // only its address was needed
	return ln.Addr().String()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
