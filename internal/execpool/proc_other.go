//go:build !linux

package execpool

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func signalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }

// pendingBytes is unknown here: standard error lines may be logged as the
// next item's.
func pendingBytes(*os.File) int { return 0 }
