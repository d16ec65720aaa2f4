// Package leaktest fails a test binary that leaves goroutines behind.
package leaktest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// patience is how long Main waits for the goroutines of passed tests to
// end: connections and servers a test closed wind down on goroutines of
// their own, slowly on a loaded machine.
const patience = 10 * time.Second

// Main runs the tests of m and exits with their code, or 1 when they
// passed but goroutines they started are still running after patience.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		err := goleak.Find()
		for deadline := time.Now().Add(patience); err != nil && time.Now().Before(deadline); err = goleak.Find() {
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "leaktest: tests passed but left goroutines behind: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
