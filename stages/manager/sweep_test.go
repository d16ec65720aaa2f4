package manager

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// A tick sweeps the whole work stream only while something is left to
// settle (items of a job with no record, a failed sweep) and every
// wholeSweepEvery ticks; the ledger asks for the other whole sweeps.
func TestTicksSweepOnlyWhatIsLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := bustest.Server(t)
	c := bustest.Client(t, srv)
	m, err := New(Deps{Bus: c}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.SweepStrays(ctx)
	for i := 1; i <= 3; i++ {
		m.sweepIfDue(ctx)
		if m.swept.quiet != i {
			t.Fatalf("quiet sweeps = %d after %d ticks with nothing to settle, want %d", m.swept.quiet, i, i)
		}
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	body, _ := json.Marshal(schemas.WorkItem{ID: "i", Job: "nobody", Payload: "x"})
	if _, err := nc.Request("pace.work.nobody", body, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	m.SweepStrays(ctx) // as the ledger would ask
	m.sweepIfDue(ctx)
	if m.swept.quiet != 0 || len(m.sightings) != 1 {
		t.Fatalf("items of a job with no record waiting their grace: quiet sweeps %d, sightings %d; want whole sweeps, 1",
			m.swept.quiet, len(m.sightings))
	}

	m.sightings = map[string]sighting{}
	m.swept.quiet = wholeSweepEvery
	m.sweepIfDue(ctx)
	if m.swept.quiet != 0 {
		t.Fatalf("quiet sweeps = %d after %d quiet ones, want a whole sweep", m.swept.quiet, wholeSweepEvery)
	}
}
