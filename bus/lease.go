package bus

import (
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// leases are the items a worker is running; one goroutine extends them all,
// instead of a timer per item.
type leases struct {
	mu   sync.Mutex
	msgs map[jetstream.Msg]struct{} // guarded by mu
}

func newLeases() *leases { return &leases{msgs: map[jetstream.Msg]struct{}{}} }

func (l *leases) add(m jetstream.Msg) {
	l.mu.Lock()
	l.msgs[m] = struct{}{}
	l.mu.Unlock()
}

func (l *leases) remove(m jetstream.Msg) {
	l.mu.Lock()
	delete(l.msgs, m)
	l.mu.Unlock()
}

// extendEvery starts extending every held lease each period with an
// in-progress acknowledgement; the returned func stops it and waits.
func (l *leases) extendEvery(period time.Duration, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			l.mu.Lock()
			held := make([]jetstream.Msg, 0, len(l.msgs))
			for m := range l.msgs {
				held = append(held, m)
			}
			l.mu.Unlock()
			for _, m := range held { // no lock held across I/O
				if err := m.InProgress(); err != nil {
					log.Warn("lease extension failed", "subject", m.Subject(), "err", err)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
