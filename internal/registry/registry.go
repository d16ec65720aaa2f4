// Package registry keeps things registered by name from packages' init
// functions: the stages a process can run, the targets workers run on.
package registry

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Registry holds values of one kind by name. Its zero value is empty and
// ready to use.
type Registry[T any] struct {
	mu     sync.Mutex
	values map[string]T
}

// Add registers v as name. A second value of a name, or an empty name, is
// a programming error: Add panics, as the init that called it would.
func (r *Registry[T]) Add(kind, name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" {
		panic(fmt.Sprintf("%s registered without a name", kind))
	}
	if _, ok := r.values[name]; ok {
		panic(fmt.Sprintf("%s %q registered twice", kind, name))
	}
	if r.values == nil {
		r.values = map[string]T{}
	}
	r.values[name] = v
}

// All returns the registered values ordered by name.
func (r *Registry[T]) All() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]T, 0, len(r.values))
	for _, name := range slices.Sorted(maps.Keys(r.values)) {
		out = append(out, r.values[name])
	}
	return out
}
