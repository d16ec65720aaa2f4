package targets

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

type nopTarget struct{}

func (nopTarget) Flags(*pflag.FlagSet)                         {}
func (nopTarget) Enabled() bool                                { return false }
func (nopTarget) Secrets() []string                            { return nil }
func (nopTarget) Validate(Workers) error                       { return nil }
func (nopTarget) Opener(Workers, *slog.Logger) (Opener, error) { return nil, nil }

// TestRegisterTarget: a registered target comes back; a second target of
// a name, or one without a name or New, panics as a package's init would.
func TestRegisterTarget(t *testing.T) {
	newNop := func() Command { return nopTarget{} }
	Register(Def{Name: "test-target", New: newNop})
	if got := Defs(); !slices.ContainsFunc(got, func(d Def) bool { return d.Name == "test-target" }) {
		t.Fatalf("Defs() = %v, want test-target among them", got)
	}
	for _, d := range []Def{{Name: "test-target", New: newNop}, {Name: "x"}, {New: newNop}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q, New set %v) did not panic", d.Name, d.New != nil)
				}
			}()
			Register(d)
		}()
	}
}
