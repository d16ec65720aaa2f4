package host

import (
	"context"
	"testing"

	"github.com/spf13/pflag"
)

type nop struct{}

func (nop) Flags(*pflag.FlagSet)                {}
func (nop) Validate() error                     { return nil }
func (nop) Wire(context.Context, Process) error { return nil }

// TestRegister: stages come back by name; a second stage of a name, or a
// Def without New, panics as a package's init would.
func TestRegister(t *testing.T) {
	saved := defs
	t.Cleanup(func() { defs = saved })
	defs = nil
	newNop := func() Stage { return nop{} }
	Register(Def{Name: "sink", New: newNop})
	Register(Def{Name: "collector", New: newNop})
	got := Defs()
	if len(got) != 2 || got[0].Name != "collector" || got[1].Name != "sink" {
		t.Fatalf("Defs() = %v, want collector, sink", got)
	}
	for _, d := range []Def{{Name: "sink", New: newNop}, {Name: "x"}, {New: newNop}} {
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
