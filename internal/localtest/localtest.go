// Package localtest helps tests run programs in the local runtime's
// sandboxes.
package localtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

// ProgramDir creates a directory for programs that sandboxed workers run,
// as an installed program's would be: every user may reach it, and it is
// outside /tmp, which a sandbox replaces with its own. It is under /run
// where the test may write there (as root), else under the default
// temporary directory. The caller removes it.
func ProgramDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("/run", pattern)
	if err != nil {
		dir, err = os.MkdirTemp("", pattern)
	}
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

// Programs returns the directory of the programs this test binary builds
// (see Program), creating it: like a ProgramDir, but one per test binary
// and kept between runs.
func Programs() (string, error) {
	base := "/run"
	if err := writable(base); err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, fmt.Sprintf("pace-test-programs-%d", os.Geteuid()), filepath.Base(os.Args[0]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for d := dir; d != base; d = filepath.Dir(d) { // whatever the umask made of them
		if err := os.Chmod(d, 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// writable returns nil if this process may create files in dir.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".pace-probe-")
	if err != nil {
		return err
	}
	f.Close() //nolint:errcheck // empty
	return os.Remove(f.Name())
}

var built sync.Map // program name -> func() (string, error)

// Program builds the main package pkg with go build (static, CGO_ENABLED=0), run in dir with env
// added to its environment, as name in Programs, once per test binary, and
// returns its path. The program is kept after the tests: the next run finds
// it up to date and does not link it again (a link of pace costs seconds of
// CPU), and no other test binary replaces it while this one runs it.
func Program(name, dir, pkg string, env ...string) (string, error) {
	once, _ := built.LoadOrStore(name, sync.OnceValues(func() (string, error) {
		programs, err := Programs()
		if err != nil {
			return "", err
		}
		path := filepath.Join(programs, name)
		defer LockBuilds()()
		// Static, -trimpath: as the images build it, so that they share
		// compiled packages, and a clone elsewhere finds it built.
		cmd := exec.Command("go", "build", "-trimpath", "-o", path, pkg)
		cmd.Dir, cmd.Env = dir, append(append(os.Environ(), "CGO_ENABLED=0"), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build -o %s %s: %w\n%s", name, pkg, err, out)
		}
		return path, nil
	}))
	return once.(func() (string, error))()
}

// Root returns the repository's root: the nearest directory above the
// working directory (a test's is its package's) whose go.mod is Pace's. Tests
// find files by it rather than by their sources' paths, which -trimpath
// leaves out.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte(module)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no directory above the working directory holds Pace's go.mod")
		}
		dir = parent
	}
}

// module is how Pace's go.mod begins.
const module = "module github.com/pace-platform/pace\n"

// LockBuilds waits until no other test process holds the builds' lock, takes
// it and returns its release. Test binaries building the same packages at
// once would each compile them: in turn, the second finds them in the build
// cache. Without the lock file (another user's), it does not wait.
func LockBuilds() (unlock func()) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("pace-test-builds-%d.lock", os.Geteuid())), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close() //nolint:errcheck // nothing written
		return func() {}
	}
	return func() { f.Close() } //nolint:errcheck // closing releases the lock
}
