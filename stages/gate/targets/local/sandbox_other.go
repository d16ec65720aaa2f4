//go:build !linux

package local

import (
	"errors"
	"os"
	"os/exec"
)

// RunSandboxInit returns at once: sandboxes need Linux.
func RunSandboxInit() {}

type cgroup interface {
	add(pid int) error
	remove() error
}

type sandboxed struct{}

func (s *Sandbox) setup(string) error { return ErrNoSandbox }

func (s *Sandbox) prepare(*exec.Cmd, string, string, Limits) (*sandboxed, error) {
	return nil, ErrNoSandbox
}

func (*sandboxed) started(*os.Process) error { return errors.ErrUnsupported }
func (*sandboxed) closeFiles()               {}

func newCgroup(string, Limits, int64) (cgroup, error) { return nil, ErrNoSandbox }
