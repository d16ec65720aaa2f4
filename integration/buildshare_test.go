package integration

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pace-platform/pace/internal/localtest"
)

// TestSharedPackagesCompileOnce: every package that Pace's tests, the
// conformance module's tests and the Kubernetes binaries of
// kubetools/build.sh all compile (client-go, apiserver and their
// dependencies, ~700 packages) comes from the same module version in the
// three modules. Built with the same flags (static, -trimpath), each is then
// compiled once, by the kube build, and found in the build cache by the
// end-to-end and conformance tests: a first run of the test command is
// minutes shorter. A dependency bump in one module only breaks that; the
// failure names the packages and the versions to align.
func TestSharedPackagesCompileOnce(t *testing.T) {
	root, err := localtest.Root()
	if err != nil {
		t.Fatal(err)
	}
	// The nested modules, as build.sh and test.sh build them: -mod=mod.
	tools := deps(t, filepath.Join(root, "integration/kubetools"), "-mod=mod", "tool")
	for _, m := range []struct{ dir, flag string }{{".", "-mod=readonly"}, {"flowcontrol/conformance", "-mod=mod"}} {
		shared := 0
		for pkg, mod := range deps(t, filepath.Join(root, m.dir), m.flag, "-test", "./...") {
			if built, ok := tools[pkg]; ok {
				shared++
				if built != mod {
					t.Errorf("%s: %s from %s, the kube build's from %s", m.dir, pkg, mod, built)
				}
			}
		}
		// The check means something only while the modules share packages.
		if shared < 100 {
			t.Errorf("%s shares %d packages with the kube build, want client-go's at least", m.dir, shared)
		}
	}
}

// deps maps each non-standard package that go list -deps finds in the
// module at dir to the module version it comes from.
func deps(t *testing.T, dir string, args ...string) map[string]string {
	t.Helper()
	args = append([]string{"list", "-deps", "-f",
		"{{if not .Standard}}{{.ImportPath}} {{with .Module}}{{.Path}}@{{.Version}}{{end}}{{end}}"}, args...)
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	found := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// A test's variant of a package ("p [p.test]") compiles only there.
		if pkg, mod, ok := strings.Cut(sc.Text(), " "); ok && !strings.Contains(mod, "[") && mod != "" {
			found[pkg] = mod
		}
	}
	return found
}
