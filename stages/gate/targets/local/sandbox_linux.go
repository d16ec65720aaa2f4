package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// sandboxInitName is the argv[0] that makes Pace's binary the first process
// of a replica's sandbox (RunSandboxInit).
const sandboxInitName = "pace-sandbox-init"

// initSpec tells the sandbox's first process what to set up and run.
type initSpec struct {
	// Path and Args are the replica's program and arguments.
	Path string   `json:"path"`
	Args []string `json:"args"`
	// ExecFD: the program is the file open at descriptor 4 (Pace's own
	// binary, which the job's user may have no path to).
	ExecFD bool `json:"exec_fd,omitempty"`
	// Dir is the replica's working directory, /tmp when its user cannot
	// enter it.
	Dir string `json:"dir"`
	// UID is the replica's uid and gid; -1 keeps the init's.
	UID int `json:"uid"`
	// NestUID, when not -1, runs the replica in a user namespace nested in
	// the init's, as this uid (the unprivileged sandbox: Pace's own uid,
	// without the capabilities that could undo the sandbox's mounts).
	NestUID int `json:"nest_uid"`
	NestGID int `json:"nest_gid"`
	// Hide are the paths the replica sees empty.
	Hide []string `json:"hide,omitempty"`
}

// setup checks that a sandbox works on this machine, as root or in user
// namespaces, by running a replica that exits at once through it: Pace's
// binary as sandboxInitName with the argument "exit".
func (s *Sandbox) setup(binary string) error {
	s.withDefaults()
	if s.Init == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNoSandbox, err)
		}
		s.Init = exe
	}
	s.isolation = IsolationUserNS
	if os.Geteuid() == 0 {
		s.isolation = IsolationUser
	}
	probe := &exec.Cmd{Path: s.Init, Args: []string{sandboxInitName, "exit"}}
	job := "probe-" + strconv.Itoa(os.Getpid())
	sb, err := s.prepare(probe, s.Init, job, Limits{})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoSandbox, err)
	}
	defer func() { _ = s.release(job) }()
	var out bytes.Buffer
	probe.Stdout, probe.Stderr = &out, &out
	if err := probe.Start(); err != nil {
		sb.closeFiles()
		return fmt.Errorf("%w (%s isolation): %w", ErrNoSandbox, s.isolation, err)
	}
	err = sb.started(probe.Process)
	hung := time.AfterFunc(time.Minute, func() { _ = probe.Process.Kill() }) // a probe must not hang Pace's start
	defer hung.Stop()
	if werr := probe.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("%w: %s", werr, bytes.TrimSpace(out.Bytes()))
	}
	if err != nil {
		return fmt.Errorf("%w (%s isolation): %w", ErrNoSandbox, s.isolation, err)
	}
	return nil
}

// sandboxed is a replica process being started in a sandbox.
type sandboxed struct {
	job     string
	user    *jobUser
	release *os.File // Pace writes one byte to it once the process is in its cgroup
	files   []*os.File
}

// prepare turns cmd into the start of its sandbox: Init as the first
// process of new namespaces, which runs cmd as job's user (cmd's program
// from a file Pace opens when it is binary, Pace's own). The caller starts
// cmd, then calls started, and releases job once the process has ended.
func (s *Sandbox) prepare(cmd *exec.Cmd, binary, job string, limits Limits) (*sandboxed, error) {
	u, err := s.acquire(job, limits)
	if err != nil {
		return nil, err
	}
	spec := initSpec{Path: cmd.Path, Args: cmd.Args, Dir: cmd.Dir, UID: u.uid, NestUID: -1, Hide: s.Hide}
	if spec.Dir == "" {
		if spec.Dir, err = os.Getwd(); err != nil {
			spec.Dir = "/"
		}
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC}
	if s.isolation == IsolationUserNS {
		uid, gid := os.Geteuid(), os.Getegid()
		spec.NestUID, spec.NestGID = uid, gid
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
	}
	sb := &sandboxed{job: job, user: u}
	fail := func(err error) (*sandboxed, error) {
		sb.closeFiles()
		_ = s.release(job)
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	sb.release, sb.files = w, []*os.File{r, w}
	cmd.ExtraFiles = []*os.File{r}
	if cmd.Path == binary {
		f, err := os.Open(binary)
		if err != nil {
			return fail(err)
		}
		sb.files = append(sb.files, f)
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		spec.ExecFD = true
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return fail(err)
	}
	cmd.Path, cmd.Args, cmd.SysProcAttr = s.Init, []string{sandboxInitName, string(js)}, attr
	return sb, nil
}

// started puts the sandbox's first process in its job's cgroup and lets it
// go on; it is killed if that fails.
func (sb *sandboxed) started(p *os.Process) error {
	var err error
	if sb.user.cgroup != nil {
		err = sb.user.cgroup.add(p.Pid)
	}
	if err == nil {
		_, err = sb.release.Write([]byte{1})
	}
	sb.closeFiles()
	if err != nil {
		_ = p.Kill()
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

func (sb *sandboxed) closeFiles() {
	for _, f := range sb.files {
		_ = f.Close()
	}
	sb.files = nil
}
