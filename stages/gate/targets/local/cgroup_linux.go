package local

import (
	"fmt"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// cgroup is the control group of one job's replicas.
type cgroup interface {
	add(pid int) error
	remove() error
}

// cpuPeriod is the CFS period a CPU limit is a quota of (100 ms, as runc).
const cpuPeriod = 100_000

// newCgroup creates the cgroup path (relative to the hierarchy's root) with
// limits, on cgroup v1 or v2, whichever the machine mounts.
func newCgroup(path string, l Limits, maxProcesses int64) (cgroup, error) {
	res := &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: &maxProcesses}}
	if l.MilliCPU > 0 {
		period, quota := uint64(cpuPeriod), l.MilliCPU*cpuPeriod/1000
		res.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	if l.MemoryBytes > 0 {
		res.Memory = &specs.LinuxMemory{Limit: &l.MemoryBytes}
	}
	if cgroups.Mode() == cgroups.Unified {
		m, err := cgroup2.NewManager("/sys/fs/cgroup", "/"+path, cgroup2.ToResources(res))
		if err != nil {
			return nil, fmt.Errorf("sandbox: cgroup %s: %w", path, err)
		}
		return cgroupV2{m}, nil
	}
	cg, err := cgroup1.New(cgroup1.StaticPath("/"+path), res)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cgroup %s: %w", path, err)
	}
	return cgroupV1{cg}, nil
}

type cgroupV1 struct{ cg cgroup1.Cgroup }

func (c cgroupV1) add(pid int) error { return c.cg.Add(cgroup1.Process{Pid: pid}) }
func (c cgroupV1) remove() error     { return c.cg.Delete() }

type cgroupV2 struct{ m *cgroup2.Manager }

func (c cgroupV2) add(pid int) error { return c.m.AddProc(uint64(pid)) }
func (c cgroupV2) remove() error     { return c.m.Delete() }
