package shufflesharding

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRequiredEntropyBits(t *testing.T) {
	for _, tc := range []struct{ deck, hand, want int }{
		{64, 6, 36}, {128, 6, 42}, {16, 4, 16}, {256, 7, 56}, {1024, 6, 60}, {512, 8, 72}, {64, 10, 60}, {32, 12, 60},
	} {
		if got := RequiredEntropyBits(tc.deck, tc.hand); got != tc.want {
			t.Errorf("RequiredEntropyBits(%d, %d) = %d, want %d", tc.deck, tc.hand, got, tc.want)
		}
	}
}

func TestNewDealer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deck, hand int
		wantErr    string
	}{
		{"ok", 1024, 6, ""},
		{"zero deck", 0, 6, "deckSize 0 or handSize 6 is not positive"},
		{"negative hand", 8, -1, "deckSize 8 or handSize -1 is not positive"},
		{"hand above deck", 8, 9, "handSize 9 is greater than deckSize 8"},
		{"huge deck", 1<<26 + 1, 2, "deckSize 67108865 is impractically large"},
		{"too much entropy", 512, 8, "required entropy bits of deckSize 512 and handSize 8 is greater than 60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDealer(tc.deck, tc.hand)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("NewDealer(%d, %d) error = %q, want %q", tc.deck, tc.hand, gotErr, tc.wantErr)
			}
			if err == nil && (d.DeckSize() != tc.deck || d.HandSize() != tc.hand) {
				t.Errorf("sizes = %d/%d, want %d/%d", d.DeckSize(), d.HandSize(), tc.deck, tc.hand)
			}
		})
	}
}

// TestGoldenHands uses the hands the real Kubernetes dealer produced (reference §2.2).
func TestGoldenHands(t *testing.T) {
	for _, tc := range []struct {
		deck, hand int
		hash       uint64
		want       []int
	}{
		{9, 3, 1001001001, []int{4, 6, 0}},
		{9, 3, 2002002002, []int{8, 2, 1}},
		{9, 1, 1001001001, []int{4}},
		{9, 1, 2002002002, []int{8}},
		{8, 3, 400900100100, []int{4, 7, 5}},
		{8, 3, 300900200200, []int{0, 6, 1}},
		{64, 7, 10010010010010, []int{26, 34, 49, 6, 39, 27, 12}},
		{64, 7, 20020020020020, []int{52, 3, 34, 14, 13, 56, 25}},
		{64, 7, 40040040040040, []int{40, 7, 4, 29, 26, 48, 51}},
		{64, 7, 50050050050050, []int{2, 42, 53, 34, 0, 12, 63}},
		{64, 7, 60060060060060, []int{28, 11, 39, 43, 38, 37, 10}},
		{64, 7, 70070070070070, []int{54, 44, 22, 49, 12, 2, 25}},
		{64, 7, 90090090090090, []int{42, 49, 57, 63, 24, 56, 46}},
		{128, 6, 0, []int{0, 1, 2, 3, 4, 5}},
		{128, 6, 1, []int{1, 0, 2, 3, 4, 5}},
		{128, 6, 1<<64 - 1, []int{127, 1, 7, 56, 91, 6}},
		{128, 6, 17644606172554983095, []int{55, 62, 126, 125, 105, 1}},
	} {
		d, err := NewDealer(tc.deck, tc.hand)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, d.DealIntoHand(tc.hash, nil)); diff != "" {
			t.Errorf("deal(%d, %d, %d) mismatch (-want +got):\n%s", tc.deck, tc.hand, tc.hash, diff)
		}
	}
}

func TestCardDuplication(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ deck, hand int }{{4, 4}, {8, 8}, {10, 10}, {12, 12}, {128, 8}, {256, 7}, {512, 6}} {
		d, err := NewDealer(tc.deck, tc.hand)
		if err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			hand := d.DealIntoHand(rng.Uint64(), nil)
			seen := map[int]bool{}
			for _, c := range hand {
				if c < 0 || c >= tc.deck || seen[c] {
					t.Fatalf("deck %d: bad hand %v", tc.deck, hand)
				}
				seen[c] = true
			}
		}
	}
}

// TestUniformDistribution deals every hash below a bound and checks each sorted
// hand appears H!·⌊hashMax/ff⌋ or H!·⌈hashMax/ff⌉ times (reference §8.3).
func TestUniformDistribution(t *testing.T) {
	for _, tc := range []struct {
		deck, hand int
		hashMax    uint64
	}{{64, 3, 1 << 22}, {128, 3, 2048256}, {50, 4, 5527200}} {
		if testing.Short() && tc.hashMax > 3_000_000 {
			continue
		}
		d, _ := NewDealer(tc.deck, tc.hand)
		ff, hf := uint64(1), uint64(1)
		for i := 0; i < tc.hand; i++ {
			ff *= uint64(tc.deck - i)
			hf *= uint64(i + 1)
		}
		counts := map[[4]int]uint64{}
		buf := make([]int, tc.hand)
		for h := uint64(0); h < tc.hashMax; h++ {
			hand := d.DealIntoHand(h, buf)
			slices.Sort(hand)
			var k [4]int
			copy(k[:], hand)
			counts[k]++
		}
		lo, hi := hf*(tc.hashMax/ff), hf*((tc.hashMax+ff-1)/ff)
		for k, n := range counts {
			if n < lo || n > hi {
				t.Fatalf("deck %d hand %d: hand %v seen %d times, want [%d, %d]", tc.deck, tc.hand, k, n, lo, hi)
			}
		}
	}
}

func TestDealIntoHand(t *testing.T) {
	d, _ := NewDealer(6, 6)
	for _, tc := range []struct {
		name string
		hand []int
	}{{"nil", nil}, {"empty", []int{}}, {"short", make([]int, 3)}, {"long", make([]int, 9)}, {"capacity", make([]int, 0, 12)}} {
		if got := d.DealIntoHand(42, tc.hand); len(got) != 6 {
			t.Errorf("%s: len = %d, want 6", tc.name, len(got))
		}
	}
}

func FuzzDeal(f *testing.F) {
	f.Add(uint64(0), uint8(128), uint8(6))
	f.Add(uint64(1<<64-1), uint8(9), uint8(3))
	f.Add(uint64(1001001001), uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, hash uint64, deck, hand uint8) {
		d, err := NewDealer(int(deck), int(hand))
		if err != nil {
			return
		}
		got := d.DealIntoHand(hash, nil)
		seen := make([]bool, deck)
		for _, c := range got {
			if c < 0 || c >= int(deck) || seen[c] {
				t.Fatalf("bad hand %v for deck %d", got, deck)
			}
			seen[c] = true
		}
	})
}
