package registry

import "testing"

// TestRegistry: values come back by name; an empty or repeated name panics.
func TestRegistry(t *testing.T) {
	var r Registry[int]
	if got := r.All(); len(got) != 0 {
		t.Fatalf("empty registry: %v", got)
	}
	r.Add("stage", "sink", 2)
	r.Add("stage", "collector", 1)
	if got := r.All(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("All() = %v, want [1 2] (collector, sink)", got)
	}
	for _, name := range []string{"sink", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%q) did not panic", name)
				}
			}()
			r.Add("stage", name, 3)
		}()
	}
}
