//go:build !linux

package local

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func signalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }
