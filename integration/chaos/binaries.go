package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the programs a chaos run starts.
type Binaries struct {
	// Pace is cmd/pace; NATSServer is nats-server at the version in go.mod,
	// built from the module cache (no network needed once it is filled).
	Pace, NATSServer string
}

// Build compiles the pace binary and nats-server into dir with the go
// command, which caches the work between runs. A binary named by the
// environment variable PACE_CHAOS_PACE or PACE_CHAOS_NATS_SERVER is used as
// it is instead.
func Build(ctx context.Context, dir string) (Binaries, error) {
	b := Binaries{Pace: os.Getenv("PACE_CHAOS_PACE"), NATSServer: os.Getenv("PACE_CHAOS_NATS_SERVER")}
	build := map[string]*string{
		"github.com/pace-platform/pace/cmd/pace": &b.Pace,
		"github.com/nats-io/nats-server/v2":      &b.NATSServer,
	}
	for pkg, bin := range build {
		if *bin != "" {
			continue
		}
		*bin = filepath.Join(dir, filepath.Base(strings.TrimSuffix(pkg, "/v2")))
		out := *bin
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}
