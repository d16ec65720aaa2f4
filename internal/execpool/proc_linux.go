package execpool

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr puts a process in its own process group and has the kernel kill
// it if the worker dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the process's group: the programs its shell started too.
func signalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }

// pendingBytes returns how many bytes wait unread in pipe f (0 if unknown).
func pendingBytes(f *os.File) int {
	rc, err := f.SyscallConn() // not Fd, which would make f blocking
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) // TIOCINQ is FIONREAD
	return n
}
