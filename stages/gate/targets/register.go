package targets

import (
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/registry"
)

// Def registers a target with the gate's process: Name is the spec's
// actuator.name, and New makes the target's command, which holds its flags.
// A target package calls Register from its init; a process imports
// it to run it.
type Def struct {
	Name string
	New  func() Command
}

// Command is a target as the gate's process sets it up: its flags,
// whether they enable it, their check, and its Opener.
type Command interface {
	// Flags registers the target's flags.
	Flags(fs *pflag.FlagSet)
	// Enabled says whether the flags run the target's jobs.
	Enabled() bool
	// Secrets are the files of its flags that hold secrets, which
	// sandboxed local workers must not reach.
	Secrets() []string
	// Validate checks the flags of an enabled or disabled target against
	// where workers reach the bus; its error names the flag at fault.
	Validate(w Workers) error
	// Opener builds the target's opener for an enabled target.
	Opener(w Workers, log *slog.Logger) (Opener, error)
}

// Workers is what the gate tells targets about the workers they start:
// what the process knows of them (where they reach the bus, their
// environment, job tokens, the paths to hide), and the Redis front's part.
type Workers struct {
	host.Workers
	// JobEnv is one job's local workers' own environment (their token);
	// nil: none.
	JobEnv func(job string) []string
	// RedisEnv is the environment of one job's Redis workers: where the
	// Redis front is and their queue; nil: no front.
	RedisEnv func(job string) []string
	// RedisAddr is where worker pods reach the Redis front ("" : pods get
	// no REDIS_HOST).
	RedisAddr string
}

var targets registry.Registry[Def]

// Register adds a target. It panics on a second target of a name or
// a Def without a name or New, as a package's init would.
func Register(d Def) {
	if d.New == nil {
		panic(fmt.Sprintf("targets.Register: target %q has no New", d.Name))
	}
	targets.Add("target", d.Name, d)
}

// Defs returns the registered targets by name.
func Defs() []Def { return targets.All() }
