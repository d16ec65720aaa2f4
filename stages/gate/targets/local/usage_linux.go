package local

import (
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// processGroups sums, from /proc, the CPU time and resident memory of the
// processes of each group in groups (process group id → job).
func processGroups(groups map[int]string) []groupUse {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	page := int64(os.Getpagesize())
	byGroup := map[int]*groupUse{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp …: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 22 {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		job, ok := groups[pgrp]
		if !ok {
			continue
		}
		var ticks int64
		for _, k := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
			n, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += n
		}
		rss, _ := strconv.ParseInt(f[21], 10, 64)
		g := byGroup[pgrp]
		if g == nil {
			g = &groupUse{job: job}
			byGroup[pgrp] = g
		}
		g.cpuSeconds += float64(ticks) / clockTicks
		g.memoryBytes += rss * page
	}
	out := make([]groupUse, 0, len(byGroup))
	for _, g := range byGroup {
		out = append(out, *g)
	}
	return out
}
