package execpool

import (
	"os"
	"syscall"
)

// procAttr puts a process in its own process group and has the kernel kill
// it if the worker dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the process's group: the programs its shell started too.
func signalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }
