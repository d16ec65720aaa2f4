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

// TestRegister: a registered stage comes back; a second stage of a name,
// or a Def without a name or New, panics as a package's init would.
func TestRegister(t *testing.T) {
	newNop := func() Stage { return nop{} }
	Register(Def{Name: "test-stage", New: newNop})
	if got := Defs(); len(got) != 1 || got[0].Name != "test-stage" {
		t.Fatalf("Defs() = %v, want test-stage", got)
	}
	for _, d := range []Def{{Name: "test-stage", New: newNop}, {Name: "x"}, {New: newNop}} {
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
