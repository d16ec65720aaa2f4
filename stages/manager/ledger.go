package manager

import (
	"context"
	"errors"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// The manager keeps the ledger of streaming jobs' items (bus.Queues.KeepLedger):
// a result counts only for an item its job was queued.

// ensuredLimit bounds the jobs whose work consumer the ledger remembers
// having made sure of; past it, it forgets them all and checks again.
const ensuredLimit = 4096

// keepLedger runs the ledger until ctx ends, starting it again a second
// after an error.
func (m *Stage) keepLedger(ctx context.Context) {
	ensured := map[string]time.Time{} // by job, the creation of the record made sure of: an id can be reused
	place := func(ctx context.Context, job string) (bus.Placement, error) {
		rec, err := m.bus.Jobs().Status(ctx, job)
		switch {
		case errors.Is(err, bus.ErrJobNotFound):
			m.sweepSoon()
			return bus.Placement{}, nil // no job (yet): the stray sweep decides
		case err != nil:
			return bus.Placement{}, err
		}
		p := bus.Placement{Enter: rec.Spec.Mode != schemas.Batch}
		if rec.State.Final() {
			m.sweepSoon()
			return p, nil // the stray sweep refuses what was not processed
		}
		if at, ok := ensured[job]; !ok || !at.Equal(rec.CreatedAt) {
			if err := m.bus.Queues().EnsureWork(ctx, rec); err != nil {
				return bus.Placement{}, err
			}
			if len(ensured) >= ensuredLimit {
				clear(ensured)
			}
			ensured[job] = rec.CreatedAt
		}
		p.Release = true
		return p, nil
	}
	for {
		err := m.bus.Queues().KeepLedger(ctx, place)
		if ctx.Err() != nil {
			return
		}
		m.log.Warn("ledger stopped; starting it again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(time.Second):
		}
	}
}
