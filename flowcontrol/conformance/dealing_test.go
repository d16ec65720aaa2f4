package conformance

import (
	"math/rand/v2"
	"slices"
	"testing"

	pace "github.com/pace-platform/pace/flowcontrol/shufflesharding"
	kube "k8s.io/apiserver/pkg/util/shufflesharding"
)

// TestDealingMatchesKube deals 150,000 random (deck, hand, hash) cases with both
// dealers and compares validation errors and hands exactly.
func TestDealingMatchesKube(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260101, 3))
	var pHand, kHand []int
	dealt := 0
	for i := 0; i < 150_000; i++ {
		deck := 1 + rng.IntN(1<<rng.IntN(11)) // skewed towards small decks
		hand := 1 + rng.IntN(min(deck, 16))
		if rng.IntN(50) == 0 {
			deck, hand = rng.IntN(5)-1, rng.IntN(20)-2 // invalid sizes
		}
		pd, perr := pace.NewDealer(deck, hand)
		kd, kerr := kube.NewDealer(deck, hand)
		if (perr == nil) != (kerr == nil) || (perr != nil && perr.Error() != kerr.Error()) {
			t.Fatalf("NewDealer(%d, %d): pace error %v, kube error %v", deck, hand, perr, kerr)
		}
		if perr != nil {
			continue
		}
		for range 3 {
			hash := rng.Uint64()
			pHand = pd.DealIntoHand(hash, pHand)
			kHand = kd.DealIntoHand(hash, kHand)
			if !slices.Equal(pHand, kHand) {
				t.Fatalf("deal(%d, %d, %d): pace %v, kube %v", deck, hand, hash, pHand, kHand)
			}
			dealt++
		}
	}
	if dealt < 100_000 {
		t.Fatalf("only %d hands compared, want at least 100,000", dealt)
	}
	t.Logf("compared %d hands", dealt)
}
