package targets_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/pace-platform/pace/internal/leaktest"
	"github.com/pace-platform/pace/internal/localtest"
)

// paceBin is the pace binary the tests' local workers run.
var paceBin string

func TestMain(m *testing.M) {
	var err error
	if paceBin, err = localtest.Program("pace", ".", "github.com/pace-platform/pace/cmd/pace"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	leaktest.Main(m) // fails the package when a test leaves a goroutine behind
}
