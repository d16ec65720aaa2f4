package local

import (
	"os"
	"syscall"
)

// procAttr puts a replica in its own process group and has the kernel kill
// it if Pace dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the replica's process group (its children included).
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
