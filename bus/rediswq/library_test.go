package rediswq_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/rediswq"
	"github.com/pace-platform/pace/bus/rediswq/rediswqtest"
	"github.com/pace-platform/pace/schemas"
)

// TestPublishedLibraryWorkersLoseNothing runs workers written to the
// published rediswq library on two real clients at once — redis-py and
// go-redis (several goroutines sharing its connection pool) — some giving
// every item back once, one killed mid-item: every item gets exactly one
// result, no worker fails, the front creates no job, and the workers are
// counted in presence while they work, and no longer once they are gone.
func TestPublishedLibraryWorkersLoseNothing(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	items := make([]string, 30)
	want := make([]string, len(items))
	for i := range items {
		items[i] = fmt.Sprintf("scan-%02d", i)
		want[i] = strings.ToUpper(items[i])
	}
	// Each give-back is a delivery: up to four workers may give an item
	// back once each before one does it.
	job(t, c, "lib", schemas.JobSpec{MaxDeliveries: 8}, items...)
	addr := front(t, rediswq.Config{Open: rediswq.SharedClient(c)})
	presence := c.Workers().Presence(nil)
	bustest.Run(t, presence.Run)

	slow := worker(t, addr, "lib", "WORK_SECONDS=600", "ITEM_LEASE_SECS=1")
	bustest.Eventually(t, time.Minute, "the slow worker is counted once it leases an item", func() bool {
		return presence.Count("lib") == 1
	})
	if err := slow.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = slow.Wait()
	bustest.Eventually(t, time.Minute, "the killed worker is no longer counted", func() bool {
		return presence.Count("lib") == 0
	})

	goredis := rediswqtest.GoWorker(t)
	workers := []*exec.Cmd{
		worker(t, addr, "lib"),
		worker(t, addr, "lib", "GIVE_BACK=1"),
		start(t, []string{goredis}, addr, "lib", "CONCURRENCY=3", "GIVE_BACK=1", "WORK_SECONDS=0.05"),
		start(t, []string{goredis}, addr, "lib"),
	}
	for _, w := range workers {
		if err := w.Wait(); err != nil {
			t.Fatalf("worker %s: %v", w.Path, err)
		}
	}
	if got := outputs(t, c, "lib"); !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	if dead, err := c.Letters().Stored(ctx, "lib"); err != nil || len(dead) != 0 {
		t.Fatalf("dead letters %v (%v), want none", dead, err)
	}
	jobs, err := c.Jobs().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != "lib" {
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		t.Fatalf("jobs %v, want only lib: the front created jobs", ids)
	}
	bustest.Eventually(t, time.Minute, "no worker counted once all have exited", func() bool {
		return presence.Count("lib") == 0
	})
}
