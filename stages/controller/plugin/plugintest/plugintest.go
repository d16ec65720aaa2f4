// Package plugintest holds what the controller plugins' tests share: a fixed
// start time, a driver that feeds progress messages to a controller, and the
// check that a controller restored from its state decides as the original.
package plugintest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// T0 is the start of every test's time line.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// At is sec seconds after T0.
func At(sec int) time.Time { return T0.Add(time.Duration(sec) * time.Second) }

// New builds the controller from f, failing the test on an error.
func New(t testing.TB, f plugin.Factory, job plugin.Job, params string) plugin.Controller {
	t.Helper()
	c, err := f(job, json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Decide feeds samples to c in order and returns the replicas of each
// decision and the last decision; an error fails the test.
func Decide(t testing.TB, c plugin.Controller, samples ...schemas.Progress) ([]int, schemas.Decision) {
	t.Helper()
	var got []int
	var last schemas.Decision
	for _, p := range samples {
		d, err := c.Decide(p)
		if err != nil {
			t.Fatalf("at %s: %v", p.At.Sub(T0), err)
		}
		got, last = append(got, d.Replicas), d
	}
	return got, last
}

// CheckResume feeds before to a controller built from f, restores a second
// one from its state, and checks that the restored controller refuses the
// last sample as stale and decides next exactly as the original does.
func CheckResume(t *testing.T, f plugin.Factory, job plugin.Job, params string, before []schemas.Progress, next schemas.Progress) {
	t.Helper()
	a := New(t, f, job, params)
	Decide(t, a, before...)
	st, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	b := New(t, f, job, params)
	if err := b.Restore(st); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Decide(before[len(before)-1]); !errors.Is(err, plugin.ErrStale) {
		t.Errorf("restored controller acted on the last sample again: err = %v, want ErrStale", err)
	}
	_, da := Decide(t, a, next)
	_, db := Decide(t, b, next)
	if diff := cmp.Diff(da, db); diff != "" {
		t.Errorf("restored controller decides differently (-orig +restored):\n%s", diff)
	}
}
