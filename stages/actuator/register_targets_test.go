package actuator

import (
	"log/slog"
	"testing"

	"github.com/spf13/pflag"
)

type nopTarget struct{}

func (nopTarget) Flags(*pflag.FlagSet)                         {}
func (nopTarget) Enabled() bool                                { return false }
func (nopTarget) Secrets() []string                            { return nil }
func (nopTarget) Validate(Workers) error                       { return nil }
func (nopTarget) Opener(Workers, *slog.Logger) (Opener, error) { return nil, nil }

// TestRegisterTarget: targets come back by name; a second target of a
// name, or one without New, panics as a package's init would.
func TestRegisterTarget(t *testing.T) {
	saved := targets
	t.Cleanup(func() { targets = saved })
	targets = nil
	newNop := func() TargetCommand { return nopTarget{} }
	RegisterTarget(TargetDef{Name: "local", New: newNop})
	RegisterTarget(TargetDef{Name: "kubernetes", New: newNop})
	if got := TargetDefs(); len(got) != 2 || got[0].Name != "kubernetes" || got[1].Name != "local" {
		t.Fatalf("TargetDefs() = %v, want kubernetes, local", got)
	}
	for _, d := range []TargetDef{{Name: "local", New: newNop}, {Name: "x"}, {New: newNop}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterTarget(%q, New set %v) did not panic", d.Name, d.New != nil)
				}
			}()
			RegisterTarget(d)
		}()
	}
}
