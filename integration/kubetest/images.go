package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/pace-platform/pace/integration/kubetest/ociarchive"
	"github.com/pace-platform/pace/internal/localtest"
)

// Worker images that ImportWorkerImages builds from this repository.
const (
	// PaceImage holds a static pace (/usr/local/bin/pace, the entrypoint)
	// and a static busybox as /bin/sh and a few tools, for pace worker
	// --exec; /var/lib/pace is writable by any user where the root is.
	PaceImage = "pace.local/pace:dev"
	// RedisWorkerImage holds examples/asperathos/goredis-worker, an
	// Asperathos-style worker on go-redis, as its entrypoint.
	RedisWorkerImage = "pace.local/goredis-worker:dev"
)

// ImportWorkerImages builds a static pace (CGO_ENABLED=0) and the go-redis
// worker from this repository into dir, imports PaceImage and
// RedisWorkerImage into the node, and returns the pace binary's path (it
// also runs on the host).
func (n *Node) ImportWorkerImages(dir string) (string, error) {
	root, err := localtest.Root()
	if err != nil {
		return "", err
	}
	paceBin, redisWorker := filepath.Join(dir, "pace"), filepath.Join(dir, "goredis-worker")
	// As the Dockerfile builds pace (CGO_ENABLED=0 -trimpath -s -w), so that
	// the two share their compiled packages; the worker is its own module.
	for _, b := range []struct{ dir, out, pkg string }{
		{root, paceBin, "./cmd/pace"},
		{filepath.Join(root, "examples", "asperathos", "goredis-worker"), redisWorker, "."},
	} {
		unlock := localtest.LockBuilds()
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
		if b.pkg == "." {
			cmd.Env = append(cmd.Env, "GOFLAGS=-mod=mod")
		}
		out, err := cmd.CombinedOutput()
		unlock()
		if err != nil {
			return "", fmt.Errorf("build %s: %w\n%s", b.pkg, err, out)
		}
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("busybox (Debian's busybox-static, integration/scripts/ensure-node-packages.sh): %w", err)
	}
	var files []ociarchive.File
	for dst, src := range map[string]string{"/usr/local/bin/pace": paceBin, "/bin/busybox": busybox} {
		f, err := ociarchive.BinaryFile(dst, src)
		if err != nil {
			return "", err
		}
		files = append(files, f)
	}
	var links []ociarchive.Link
	for _, tool := range []string{"sh", "cat", "echo", "tr", "sleep", "touch", "id", "ls", "wget"} {
		links = append(links, ociarchive.Link{Path: "/bin/" + tool, Target: "busybox"})
	}
	if err := n.Import(ociarchive.Image{Name: PaceImage, Files: files, Links: links,
		Dirs: []string{"/tmp", "/var/lib/pace"}, Entrypoint: []string{"/usr/local/bin/pace"}}); err != nil {
		return "", err
	}
	rw, err := ociarchive.BinaryFile("/usr/local/bin/goredis-worker", redisWorker)
	if err != nil {
		return "", err
	}
	return paceBin, n.Import(ociarchive.Image{Name: RedisWorkerImage, Files: []ociarchive.File{rw},
		Dirs: []string{"/tmp"}, Entrypoint: []string{"/usr/local/bin/goredis-worker"}})
}
