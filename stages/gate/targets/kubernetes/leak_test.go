package kubernetes

import (
	"testing"

	"github.com/pace-platform/pace/internal/leaktest"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) { leaktest.Main(m) }
