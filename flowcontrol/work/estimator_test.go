package work

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type fakeObjects map[string]struct {
	stats Stats
	err   error
}

func (f fakeObjects) ObjectStats(group, resource string) (Stats, error) {
	v, ok := f[resource]
	if !ok {
		return Stats{}, ErrObjectCountNotFound
	}
	return v.stats, v.err
}

type fixedWatches int

func (w fixedWatches) WatchCount(*Request) int { return int(w) }

func boolPtr(b bool) *bool { return &b }

// storageReads is the default configuration as upstream's tests run it,
// without etcd: a list without resourceVersion is read from storage.
func storageReads() EstimatorConfig {
	cfg := DefaultEstimatorConfig()
	cfg.ConsistentReadFromCache = false
	return cfg
}

// TestEstimate uses the vectors of reference §5.3 and §5.4 (from upstream's
// width_test.go and mutating estimator).
func TestEstimate(t *testing.T) {
	objects := fakeObjects{
		"events":  {stats: Stats{ObjectCount: 699, AverageObjectSizeBytes: 10_000}},
		"small":   {stats: Stats{ObjectCount: 69, AverageObjectSizeBytes: 10_000}},
		"pods":    {stats: Stats{ObjectCount: 799, AverageObjectSizeBytes: 10_000}},
		"big":     {stats: Stats{ObjectCount: 10, AverageObjectSizeBytes: 200_000}},
		"stale":   {err: ErrObjectCountStale},
		"secrets": {stats: Stats{ObjectCount: 799, AverageObjectSizeBytes: 1_000}},
	}
	for _, tc := range []struct {
		name    string
		req     *Request
		watches int
		want    Estimate
	}{
		{"unknown request", nil, 0, Estimate{InitialSeats: 100}},
		{"get", &Request{Verb: "get", Resource: "events"}, 0, Estimate{InitialSeats: 1}},
		{"list from storage with limit", &Request{Verb: "list", Resource: "events", Limit: 399, ResourceVersion: "1"}, 0, Estimate{InitialSeats: 40}},
		{"list from cache capped at 1MB", &Request{Verb: "list", Resource: "events", ResourceVersion: "1"}, 0, Estimate{InitialSeats: 10}},
		{"small list from cache", &Request{Verb: "list", Resource: "small", ResourceVersion: "1"}, 0, Estimate{InitialSeats: 7}},
		{"selector from storage", &Request{Verb: "list", Resource: "pods", LabelSelector: "a=b", ResourceVersion: "1", ResourceVersionMatch: "Exact"}, 0, Estimate{InitialSeats: 80}},
		{"single name", &Request{Verb: "list", Resource: "big", Name: "x", ResourceVersionMatch: "Exact", ResourceVersion: "1"}, 0, Estimate{InitialSeats: 2}},
		{"stale count", &Request{Verb: "list", Resource: "stale"}, 0, Estimate{InitialSeats: 100}},
		{"aggregated resource", &Request{Verb: "list", Resource: "unknown"}, 0, Estimate{InitialSeats: 1}},
		{"watch with initial events", &Request{Verb: "watch", Resource: "secrets", ResourceVersion: "1", SendInitialEvents: boolPtr(true)}, 0, Estimate{InitialSeats: 8}},
		{"legacy watch", &Request{Verb: "watch", Resource: "secrets"}, 0, Estimate{InitialSeats: 8}},
		{"watch from rv", &Request{Verb: "watch", Resource: "secrets", ResourceVersion: "1"}, 0, Estimate{InitialSeats: 1}},
		{"write with 29 watchers", &Request{Verb: "create", Resource: "pods"}, 29, Estimate{InitialSeats: 1, FinalSeats: 3, AdditionalLatency: 5 * time.Millisecond}},
		{"write with 199 watchers", &Request{Verb: "update", Resource: "pods"}, 199, Estimate{InitialSeats: 1, FinalSeats: 10, AdditionalLatency: 10 * time.Millisecond}},
		{"write with 5 watchers", &Request{Verb: "patch", Resource: "pods"}, 5, Estimate{InitialSeats: 1}},
		{"token request", &Request{Verb: "create", Resource: "serviceaccounts", Subresource: "token"}, 500, Estimate{InitialSeats: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEstimator(storageReads(), objects, fixedWatches(tc.watches), nil)
			if diff := cmp.Diff(tc.want, e.Estimate(tc.req, "pl")); diff != "" {
				t.Errorf("estimate mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEstimateCountFormulaAndCaps(t *testing.T) {
	objects := fakeObjects{"cm": {stats: Stats{ObjectCount: 1000, AverageObjectSizeBytes: 1_000}},
		"few": {stats: Stats{ObjectCount: 99, AverageObjectSizeBytes: 1_000}}}
	cfg := storageReads()
	cfg.SizeBased = false
	e := NewEstimator(cfg, objects, fixedWatches(0), nil)
	// reference §8.5: 1000 objects from storage -> 20 seats, 99 -> 2
	for res, want := range map[string]int{"cm": 20, "few": 2} {
		if got := e.Estimate(&Request{Verb: "list", Resource: res}, "pl").InitialSeats; got != want {
			t.Errorf("count formula %s = %d, want %d", res, got, want)
		}
	}
	capped := NewEstimator(cfg, objects, fixedWatches(500), func(pl string) int { return 4 })
	if got := capped.Estimate(&Request{Verb: "list", Resource: "cm"}, "pl").InitialSeats; got != 4 {
		t.Errorf("per-level cap: %d seats, want 4", got)
	}
	if got := capped.Estimate(&Request{Verb: "delete", Resource: "cm"}, "pl"); got.FinalSeats != 4 || got.AdditionalLatency != 62500*time.Microsecond {
		t.Errorf("mutating capped = %+v, want 4 final seats for 62.5ms", got)
	}
}

// TestConsistentListsFromCache: by default, as kube-apiserver v1.37 with an
// etcd that answers watch progress requests, a list without resourceVersion
// is served from the watch cache, and charged so.
func TestConsistentListsFromCache(t *testing.T) {
	objects := fakeObjects{"events": {stats: Stats{ObjectCount: 699, AverageObjectSizeBytes: 10_000}}}
	list := &Request{Verb: "list", Resource: "events"}
	for _, tc := range []struct {
		name string
		cfg  EstimatorConfig
		want int
	}{{"from cache (default)", DefaultEstimatorConfig(), 10}, {"from storage", storageReads(), 70}} {
		if got := NewEstimator(tc.cfg, objects, fixedWatches(0), nil).Estimate(list, "pl").InitialSeats; got != tc.want {
			t.Errorf("%s: %d seats, want %d", tc.name, got, tc.want)
		}
	}
}
