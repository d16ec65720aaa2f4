package conformance

import (
	"math"
	"math/rand/v2"
	"testing"
	_ "unsafe" // for go:linkname

	"github.com/pace-platform/pace/flowcontrol/borrowing"
	_ "k8s.io/apiserver/pkg/util/flowcontrol" // links computeConcurrencyAllocation
)

// kubeItem has the layout of kube's unexported allocProblemItem.
type kubeItem struct {
	target     float64
	lowerBound float64
	upperBound float64
}

// kubeAllocate is kube-apiserver's unexported water-filling solver.
//
//go:linkname kubeAllocate k8s.io/apiserver/pkg/util/flowcontrol.computeConcurrencyAllocation
func kubeAllocate(requiredSum int, classes []kubeItem) ([]float64, float64, error)

func toKube(items []borrowing.Item) []kubeItem {
	out := make([]kubeItem, len(items))
	for i, it := range items {
		out[i] = kubeItem{target: it.Target, lowerBound: it.LowerBound, upperBound: it.UpperBound}
	}
	return out
}

// TestAllocationMatchesKube solves 10,000 random problems with both solvers
// and requires the same allocations and fair proportion within 1e-10.
func TestAllocationMatchesKube(t *testing.T) {
	rng := rand.New(rand.NewPCG(1234567890, 0))
	for i := range 10_000 {
		required, items := borrowing.RandomProblem(rng)
		pa, pf, perr := borrowing.Allocate(required, items)
		ka, kf, kerr := kubeAllocate(required, toKube(items))
		if (perr == nil) != (kerr == nil) {
			t.Fatalf("problem %d (%d, %+v): pace error %v, kube error %v", i, required, items, perr, kerr)
		}
		if perr != nil {
			continue
		}
		if !near(pf, kf) {
			t.Fatalf("problem %d (%d, %+v): fairProp pace %v, kube %v", i, required, items, pf, kf)
		}
		for j := range pa {
			if !near(pa[j], ka[j]) {
				t.Fatalf("problem %d (%d, %+v): alloc %d pace %v, kube %v", i, required, items, j, pa[j], ka[j])
			}
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-10*math.Max(1, math.Abs(b)) }
