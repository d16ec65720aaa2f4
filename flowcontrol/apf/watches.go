package apf

import (
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pace-platform/pace/flowcontrol/work"
)

// watchKey identifies what a watch observes: a whole resource, a namespace of
// it, or one object.
type watchKey struct {
	group, resource, namespace, name string
}

// indexedFields are the fields by which kube-apiserver's watch cache
// dispatches events to a subset of a resource's watches; a watch narrowed by
// one is not counted (a kubelet's pod watch, spec.nodeName=NODE, is not
// notified of other nodes' pods).
var indexedFields = map[string]string{"pods": "spec.nodeName"}

// WatchTracker counts the watches in progress that the gate's HTTP filter
// admitted, by group, resource, namespace and name, as kube-apiserver's watch
// tracker does, and tells the work estimator how many of them a write will
// notify. It only knows the watches that pass through this process: behind
// `pace gate proxy` those of the proxy's clients, not those made directly to
// the API server. It is safe for concurrent use.
type WatchTracker struct {
	mu     sync.Mutex // guards counts
	counts map[watchKey]int
}

// NewWatchTracker returns an empty tracker.
func NewWatchTracker() *WatchTracker {
	return &WatchTracker{counts: map[watchKey]int{}}
}

// Register counts r, a watch, until the returned func is called. A request
// that is not a watch, or a watch narrowed by an indexed field, is not
// counted (the func then does nothing).
func (t *WatchTracker) Register(r *work.Request) (forget func()) {
	if r.Verb != "watch" || narrowedByIndex(r) {
		return func() {}
	}
	k := watchKey{r.APIGroup, r.Resource, r.Namespace, r.Name}
	t.mu.Lock()
	t.counts[k]++
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.counts[k]--; t.counts[k] <= 0 {
				delete(t.counts, k)
			}
		})
	}
}

// narrowedByIndex reports whether a watch selects a non-empty value of its
// resource's indexed field. As in kube, list options that do not all parse
// (a limit, a label selector) select nothing.
func narrowedByIndex(r *work.Request) bool {
	field, ok := indexedFields[r.Resource]
	if !ok || r.FieldSelector == "" || r.InvalidListOptions {
		return false
	}
	if _, err := labels.Parse(r.LabelSelector); err != nil {
		return false
	}
	sel, err := fields.ParseSelector(r.FieldSelector)
	if err != nil {
		return false
	}
	v, ok := sel.RequiresExactMatch(field)
	return ok && v != ""
}

// WatchCount implements work.WatchCounter: the watches of r's resource that
// watch all of it, its namespace, or its object. Read-only requests notify none.
func (t *WatchTracker) WatchCount(r *work.Request) int {
	switch r.Verb {
	case "get", "list", "watch", "proxy":
		return 0
	}
	k := watchKey{group: r.APIGroup, resource: r.Resource}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.counts[k]
	if r.Namespace != "" {
		k.namespace = r.Namespace
		n += t.counts[k]
	}
	if r.Name != "" {
		k.name = r.Name
		n += t.counts[k]
	}
	return n
}
