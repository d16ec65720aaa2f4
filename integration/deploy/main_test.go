package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/internal/localtest"
)

var (
	cp      *kubetest.ControlPlane
	kubeBin string // kube-apiserver, etcd and kustomize
	repo    string // the repository's root
	workDir string // built binaries, control-plane state
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1) // a missing real component fails the suite, it does not skip it
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if repo, err = localtest.Root(); err != nil {
		return 0, err
	}
	if kubeBin, err = kubetest.Binaries(); err != nil {
		return 0, err
	}
	if workDir, err = os.MkdirTemp("", "pace-deploy"); err != nil {
		return 0, err
	}
	// The image's binary runs as uid 65532: it must be able to reach it.
	if err := os.Chmod(workDir, 0o755); err != nil {
		return 0, err
	}
	kubeDir := filepath.Join(workDir, "kube")
	if err := os.Mkdir(kubeDir, 0o700); err != nil {
		return 0, err
	}
	if cp, err = kubetest.Start(kubeBin, kubeDir); err != nil {
		return 0, err
	}
	code := m.Run()
	cp.Stop()
	if code == 0 {
		_ = os.RemoveAll(workDir)
	}
	return code, nil
}
