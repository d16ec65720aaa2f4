package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// RunSandboxInit runs the first process of a replica's sandbox when the
// binary was started as one (by a Runtime with a Sandbox), and then exits
// with the replica's status; otherwise it returns at once. Call it first
// thing in main (and in TestMain of tests that run sandboxed replicas with
// the test binary).
func RunSandboxInit() {
	if len(os.Args) != 2 || os.Args[0] != sandboxInitName {
		return
	}
	if os.Args[1] == "exit" { // Sandbox.setup's replica
		os.Exit(0)
	}
	os.Exit(sandboxInit(os.Args[1]))
}

// sandboxInit waits until Pace has put it in its job's cgroup, makes the
// mounts private, mounts /proc for its PID namespace, private temporary
// directories and empty stand-ins for the hidden paths, then runs the
// replica as its job's user and reaps processes until the replica ends.
func sandboxInit(specJSON string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "pace sandbox: %v\n", err)
		return 125
	}
	var spec initSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fail(err)
	}
	// no_new_privs is a thread's: the replica is forked from this one.
	runtime.LockOSThread()
	release := os.NewFile(3, "release")
	if n, _ := release.Read(make([]byte, 1)); n != 1 {
		return fail(errors.New("not released by Pace"))
	}
	_ = release.Close()
	if err := isolate(spec.Hide); err != nil {
		return fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("no_new_privs: %w", err))
	}
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args, Env: os.Environ(), Dir: spec.Dir,
		Stdout: os.Stdout, Stderr: os.Stderr, SysProcAttr: &syscall.SysProcAttr{}}
	if spec.ExecFD {
		cmd.Path, cmd.ExtraFiles = "/proc/self/fd/3", []*os.File{os.NewFile(4, "program")}
	}
	uid, gid := spec.UID, spec.UID // the replica's, as this process sees them
	if spec.NestUID >= 0 {
		// This process is root of its user namespace, mapped to Pace's
		// user; the replica is that user in a namespace of its own, where
		// it holds no capability of this one.
		uid, gid = 0, 0
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: spec.NestUID, HostID: 0, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: spec.NestGID, HostID: 0, Size: 1}}
	} else {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	if !spec.ExecFD && !strings.Contains(spec.Args[0], "/") {
		cmd.Path = lookPathAs(spec.Args[0], spec.Path, uid, gid) // as a shell of the job's user would
	}
	if !enterable(cmd.Dir, uid, gid) {
		fmt.Fprintf(os.Stderr, "pace sandbox: the working directory %s is not reachable by the job's user: running in /tmp\n", cmd.Dir)
		cmd.Dir = "/tmp"
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	if err := cmd.Start(); err != nil {
		if strings.HasPrefix(cmd.Path, "/tmp/") {
			err = fmt.Errorf("%w (a sandboxed worker has a private /tmp: put its program elsewhere)", err)
		}
		return fail(fmt.Errorf("did not start: %w", err))
	}
	go func() {
		for sig := range signals {
			_ = cmd.Process.Signal(sig)
		}
	}()
	for { // as PID 1, reap every orphan until the replica itself ends
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return fail(err)
		case pid != cmd.Process.Pid:
		case ws.Signaled():
			return 128 + int(ws.Signal())
		default:
			return ws.ExitStatus()
		}
	}
}

// isolate mounts what the replica sees differently from Pace, in the
// sandbox's own mount namespace: nothing propagates back to the host.
func isolate(hide []string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, p := range hide {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			continue // nothing there to hide
		case fi.IsDir():
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=000,size=4k")
		default:
			err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	for _, dir := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("private %s: %w", dir, err)
		}
	}
	return nil
}

// enterable reports whether a process of uid and gid, without
// capabilities or supplementary groups, may enter dir: it exists and every
// directory on its path grants it search permission.
func enterable(dir string, uid, gid int) bool {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return false
	}
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			return false
		}
		if st.Mode&permBit(st, uid, gid, 0o001) == 0 {
			return false
		}
		if p == "/" {
			return true
		}
	}
}

// lookPathAs finds name in $PATH as a process of uid and gid (without
// capabilities) would: the first executable it may reach. Pace found
// it at found as its own user, which is kept when the job's user finds
// none, so that the error names it.
func lookPathAs(name, found string, uid, gid int) string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || !enterable(dir, uid, gid) {
			continue
		}
		var st unix.Stat_t
		p := filepath.Join(dir, name)
		if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if st.Mode&permBit(st, uid, gid, 0o001) != 0 {
			return p
		}
	}
	return found
}

// permBit returns the bit of perm (0o001: execute, 0o004: read) that applies
// to uid and gid in the mode of st: the owner's, the group's or others'.
func permBit(st unix.Stat_t, uid, gid int, perm uint32) uint32 {
	switch {
	case int(st.Uid) == uid:
		return perm << 6
	case int(st.Gid) == gid:
		return perm << 3
	}
	return perm
}
