package bustest

import (
	"strings"
	"testing"
)

// FillQuota calls push with 0, 1, … — each a push of size bytes of payload
// into one user's work stream of quota bytes — until the server has refused
// a few with "maximum bytes exceeded", and returns how many it accepted. It
// fails the test on any other error, when none is refused, or when the
// pushes accepted do not come near the quota (JetStream counts each
// message's headers and subject too).
func FillQuota(t testing.TB, quota, size int, push func(i int) error) (accepted int) {
	t.Helper()
	refused := 0
	for i := 0; refused < 4 && i < 4*quota/size; i++ {
		switch err := push(i); {
		case err == nil:
			accepted++
		case strings.Contains(err.Error(), "maximum bytes exceeded"):
			refused++
		default:
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if refused == 0 || accepted*size > quota || accepted*size < quota/2 {
		t.Fatalf("pushes of %d bytes: %d accepted, %d refused; want refusals once about %d bytes are queued", size, accepted, refused, quota)
	}
	return accepted
}
