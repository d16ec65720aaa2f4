package bus

import (
	"context"
	"testing"
	"time"
)

// take returns every free slot, waits for one when none is, waits for the
// rest only up to its linger, and returns 0 once ctx ends with none free;
// a stale signal does not make it return with none.
func TestSlotPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newSlotPool(3)
	if n := p.take(ctx, time.Hour); n != 3 {
		t.Fatalf("take with every slot free = %d, want 3", n)
	}
	// Freed one, then two: take wakes for the first, and for the last
	// rather than at the end of its hour-long linger.
	go func() { p.release(1); p.release(2) }()
	if n := p.take(ctx, time.Hour); n != 3 {
		t.Fatalf("take = %d, want the 3 freed", n)
	}
	// The first and all signals of that round may be left over; with none
	// free, take still waits for a release.
	freed := make(chan struct{})
	go func() { <-freed; p.release(1) }()
	close(freed)
	if n := p.take(ctx, time.Millisecond); n != 1 {
		t.Fatalf("take after a lone release = %d, want 1", n)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if n := p.take(cancelled, time.Hour); n != 0 {
		t.Fatalf("take with none free and ctx ended = %d, want 0", n)
	}
	p.release(0)
	if got := p.free.Load(); got != 0 {
		t.Fatalf("free = %d after release(0), want 0", got)
	}
}
