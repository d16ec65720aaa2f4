package local

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"sync"
)

// Isolation says how a sandbox keeps a job's replicas from Pace and from
// other jobs.
type Isolation string

const (
	// IsolationUser (Pace runs as root): each job runs as a user of its
	// own, in a cgroup of its own.
	IsolationUser Isolation = "user"
	// IsolationUserNS (Pace runs unprivileged): each replica runs in a
	// user namespace as Pace's user, without its capabilities and without
	// a cgroup of its own.
	IsolationUserNS Isolation = "userns"
)

// Sandbox isolates the replicas of each job (Config.Sandbox). A replica
// runs in PID, mount and IPC namespaces of its own: it sees only its own
// processes in /proc, a private /tmp, /var/tmp and /dev/shm, and an empty,
// unreadable directory (or file) in place of every path in Hide. Its
// environment is the replica's and nothing of Pace's (Config.Env).
//
// A replica is started by SandboxInit, Pace's own binary in a role of its
// own (the first process of the namespaces, which forwards signals, reaps
// orphans and exits with the replica's status); RunSandboxInit must be
// called first thing in the binary's main.
type Sandbox struct {
	// Init is the binary that is each sandbox's first process, which calls
	// RunSandboxInit; empty means the running executable.
	Init string
	// Hide are paths replicas must not reach: Pace's data directory, its
	// keys and token files. Missing paths are skipped.
	Hide []string
	// FirstUID and UIDs are the range job users are allocated from when
	// Pace runs as root, one uid (and the gid of the same number) per job
	// with replicas. Zero means systemd's range for dynamic users, 61184
	// to 65519.
	FirstUID, UIDs int
	// Cgroup is the parent of the jobs' cgroups, "pace" when empty: a job's
	// replicas share the cgroup <Cgroup>/<job>, which its limits bound.
	Cgroup string
	// MaxProcesses bounds the processes of one job (a fork bomb stays in
	// its cgroup). Zero means 4096.
	MaxProcesses int64

	isolation Isolation
	mu        sync.Mutex
	users     map[string]*jobUser // job → its user while it has replicas; guarded by mu
	taken     map[int]bool        // uids in use; guarded by mu
}

// Limits bound what one job's replicas use together (a job's
// worker.resources.limits), enforced by its cgroup when Pace runs as root.
// Zero means no limit.
type Limits struct {
	MilliCPU    int64
	MemoryBytes int64
}

// jobUser is what a job's sandboxed replicas share: their uid and gid and
// their cgroup.
type jobUser struct {
	uid     int
	cgroup  cgroup // nil without one
	holders int    // replicas running
}

// Isolation reports how the sandbox isolates replicas, once New has
// checked that it works here.
func (s *Sandbox) Isolation() Isolation { return s.isolation }

// ErrNoSandbox is returned by New when a sandbox is asked for and this
// machine can isolate no replica (no user namespaces for an unprivileged
// Pace, or not Linux).
var ErrNoSandbox = errors.New("local runtime: no sandbox possible")

func (s *Sandbox) withDefaults() {
	if s.FirstUID == 0 && s.UIDs == 0 {
		s.FirstUID, s.UIDs = 61184, 65519-61184+1
	}
	if s.Cgroup == "" {
		s.Cgroup = "pace"
	}
	if s.MaxProcesses == 0 {
		s.MaxProcesses = 4096
	}
	s.users, s.taken = map[string]*jobUser{}, map[int]bool{}
}

// acquire returns the user of job's replicas, allocating its uid and
// creating its cgroup for its first running replica.
func (s *Sandbox) acquire(job string, limits Limits) (*jobUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.users[job]; u != nil {
		u.holders++
		return u, nil
	}
	u := &jobUser{uid: -1, holders: 1}
	if s.isolation == IsolationUser {
		for i := range s.UIDs {
			if uid := s.FirstUID + i; !s.taken[uid] && !systemUser(uid) {
				u.uid = uid
				break
			}
		}
		if u.uid < 0 {
			return nil, fmt.Errorf("sandbox: all %d job users (uids from %d) are taken", s.UIDs, s.FirstUID)
		}
		cg, err := newCgroup(s.Cgroup+"/"+job, limits, s.MaxProcesses)
		if err != nil {
			return nil, err
		}
		u.cgroup = cg
		s.taken[u.uid] = true
	}
	s.users[job] = u
	return u, nil
}

// release is called when one of job's replica processes has ended; the
// last one frees the job's uid and removes its cgroup.
func (s *Sandbox) release(job string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[job]
	if u == nil {
		return nil
	}
	if u.holders--; u.holders > 0 {
		return nil
	}
	delete(s.users, job)
	delete(s.taken, u.uid)
	if u.cgroup != nil {
		return u.cgroup.remove() // its processes have ended: the sandbox's first one took them along
	}
	return nil
}

// systemUser reports whether uid belongs to a user of this machine's
// passwd database, which a job must never run as.
func systemUser(uid int) bool {
	_, err := user.LookupId(strconv.Itoa(uid))
	return err == nil
}
