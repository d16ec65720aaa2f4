package manager_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

// items is a batch job document of n items of size bytes each.
func items(n, size int) string {
	list := make([]string, n)
	for i := range list {
		list[i] = fmt.Sprintf("%q", strings.Repeat("x", size))
	}
	return `{"deadline":"1h","workload":{"items":[` + strings.Join(list, ",") + `]}}`
}

// A submission larger than a job may be, or that would take its owner
// past their quota of queued items, is refused before anything is stored.
func TestQuotasRefuseBeforeStoring(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *manager.Config) { c.MaxJobItems, c.MaxUserQueued = 5, 8 })
	if r := e.do("POST", "/submissions", "alice-token", items(6, 1)); r.code != http.StatusRequestEntityTooLarge ||
		!strings.Contains(r.apiError(t).Message, "at most 5 per job") {
		t.Errorf("6 items = %d %s, want 413", r.code, r.body)
	}
	e.submit("alice-token", items(5, 1))
	r := e.do("POST", "/submissions", "alice-token", items(4, 1))
	if r.code != http.StatusTooManyRequests || r.hdr.Get("Retry-After") == "" || r.apiError(t).RetryAfter == 0 ||
		!strings.Contains(r.apiError(t).Message, "alice has 5 items queued") {
		t.Errorf("past alice's quota = %d %v %s, want 429 with Retry-After", r.code, r.hdr, r.body)
	}
	e.submit("bob-token", items(4, 1)) // another user's quota
	jobs, err := e.c.Jobs().List(context.Background())
	if err != nil || len(jobs) != 2 {
		t.Errorf("jobs = %d (%v), want the two admitted", len(jobs), err)
	}
}

// A submission whose items do not all fit is removed whole: the answer is
// 507 with Retry-After, no job and no item is left, and the next
// submission that fits is taken.
func TestASubmissionIsStoredWholeOrNotAtAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *manager.Config) { c.MaxBodyBytes = 4 << 20 })
	ctx := context.Background()
	js := e.c.JetStream()
	work, err := js.Stream(ctx, "PACE_WORK")
	if err != nil {
		t.Fatal(err)
	}
	cfg := work.CachedInfo().Config
	cfg.MaxBytes = 256 << 10 // room for about 200 items of 1 KiB
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", "/submissions", "alice-token", items(1000, 1000))
	if r.code != http.StatusInsufficientStorage || r.hdr.Get("Retry-After") == "" ||
		!strings.Contains(r.apiError(t).Message, "nothing was kept") {
		t.Fatalf("a submission that does not fit = %d %v %s, want 507 with Retry-After", r.code, r.hdr, r.body)
	}
	if jobs, err := e.c.Jobs().List(ctx); err != nil || len(jobs) != 0 {
		t.Errorf("jobs after the refusal = %d (%v), want none", len(jobs), err)
	}
	info, err := work.Info(ctx)
	if err != nil || info.State.Msgs != 0 {
		t.Errorf("work stream holds %d items (%v), want none", info.State.Msgs, err)
	}
	id := e.submit("bob-token", items(2, 10))
	if rec, err := e.c.Jobs().Status(ctx, id); err != nil || rec.Total != 2 {
		t.Errorf("the next submission: %+v (%v)", rec, err)
	}
}

// A user with as many unfinished jobs as the quota gets no other, submitted
// or declared by a push, until one ends; another user's quota is theirs.
func TestAJobQuotaBoundsAUsersUnfinishedJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *manager.Config) { c.MaxUserJobs = 2 })
	ctx := context.Background()
	alice := auth.User{Name: "alice", Groups: []string{auth.Authenticated}}
	first := e.submit("alice-token", `{"mode":"streaming"}`)
	if _, err := e.m.Declare(ctx, alice, "alice-pushes"); err != nil {
		t.Fatalf("declaring alice's second job: %v", err)
	}
	r := e.do("POST", "/submissions", "alice-token", items(1, 1))
	if r.code != http.StatusTooManyRequests || r.hdr.Get("Retry-After") == "" ||
		!strings.Contains(r.apiError(t).Message, "alice has 2 unfinished jobs") ||
		!strings.Contains(r.apiError(t).Message, "--max-user-jobs") {
		t.Errorf("alice's third job = %d %v %s, want 429 naming the quota", r.code, r.hdr, r.body)
	}
	var apiErr *schemas.APIError
	if _, err := e.m.Declare(ctx, alice, "alice-pushes-more"); !errors.As(err, &apiErr) || apiErr.Code != http.StatusTooManyRequests {
		t.Errorf("declaring alice's third job: %v, want 429", err)
	}
	if _, err := e.m.Declare(ctx, alice, "alice-pushes"); err != nil {
		t.Errorf("declaring alice's existing job again: %v, want it confirmed", err)
	}
	e.submit("bob-token", items(1, 1)) // bob's quota is his own

	if r := e.do("PUT", "/submissions/"+first+"/terminate", "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatalf("terminate = %d %s", r.code, r.body)
	}
	e.waitState(first, schemas.Terminated)
	e.submit("alice-token", items(1, 1)) // a job ended: room for one more
	jobs, err := e.c.Jobs().List(ctx)
	if err != nil || len(jobs) != 4 {
		t.Errorf("jobs = %d (%v), want the four admitted", len(jobs), err)
	}
}
