package local

// Use is what one job's replicas use at a moment: the CPU time their
// process groups have consumed so far (live processes and the children
// they reaped) and the memory they hold.
type Use struct {
	Job         string
	CPUSeconds  float64
	MemoryBytes int64
	Replicas    int
}

// Measure returns the use of every job whose Worker is Metered, from the
// process table (on Linux; elsewhere every use is zero).
func (r *Runtime) Measure() []Use {
	groups := map[int]string{} // process group (a replica's pid) → job
	r.mu.Lock()
	uses := map[string]*Use{}
	var order []string
	for job, p := range r.jobs {
		if !p.worker.Metered {
			continue
		}
		uses[job] = &Use{Job: job}
		order = append(order, job)
		for _, rep := range p.replicas {
			rep.mu.Lock()
			if rep.proc != nil {
				groups[rep.proc.Pid] = job
				uses[job].Replicas++
			}
			rep.mu.Unlock()
		}
	}
	r.mu.Unlock()
	if len(uses) == 0 {
		return nil
	}
	for _, g := range processGroups(groups) {
		u := uses[g.job]
		u.CPUSeconds += g.cpuSeconds
		u.MemoryBytes += g.memoryBytes
	}
	out := make([]Use, 0, len(order))
	for _, job := range order {
		out = append(out, *uses[job])
	}
	return out
}

// groupUse is the use of one process group.
type groupUse struct {
	job         string
	cpuSeconds  float64
	memoryBytes int64
}
