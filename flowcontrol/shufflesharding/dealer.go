package shufflesharding

import (
	"fmt"
	"math"
)

// MaxHashBits is the number of hash bits a hand may consume.
const MaxHashBits = 60

// maxDeckSize bounds the deck; larger decks are impractical.
const maxDeckSize = 1 << 26

// RequiredEntropyBits returns ceil(log2(deckSize) × handSize).
func RequiredEntropyBits(deckSize, handSize int) int {
	return int(math.Ceil(math.Log2(float64(deckSize)) * float64(handSize)))
}

// Dealer deals hands of a fixed size from a deck of a fixed size. It is
// immutable and safe for concurrent use.
type Dealer struct {
	deckSize int
	handSize int
}

// NewDealer validates the sizes and returns a Dealer. The error texts match
// Kubernetes' so that configuration errors read the same.
func NewDealer(deckSize, handSize int) (*Dealer, error) {
	switch {
	case deckSize <= 0 || handSize <= 0:
		return nil, fmt.Errorf("deckSize %d or handSize %d is not positive", deckSize, handSize)
	case handSize > deckSize:
		return nil, fmt.Errorf("handSize %d is greater than deckSize %d", handSize, deckSize)
	case deckSize > maxDeckSize:
		return nil, fmt.Errorf("deckSize %d is impractically large", deckSize)
	case RequiredEntropyBits(deckSize, handSize) > MaxHashBits:
		return nil, fmt.Errorf("required entropy bits of deckSize %d and handSize %d is greater than %d", deckSize, handSize, MaxHashBits)
	}
	return &Dealer{deckSize: deckSize, handSize: handSize}, nil
}

// DeckSize returns the number of cards in the deck.
func (d *Dealer) DeckSize() int { return d.deckSize }

// HandSize returns the number of cards in a hand.
func (d *Dealer) HandSize() int { return d.handSize }

// Deal calls pick with each card of hashValue's hand, in deal order.
func (d *Dealer) Deal(hashValue uint64, pick func(card int)) {
	var digits [16]uint64 // the entropy limit allows at most 15 cards (15×log2 15 ≤ 60)
	v := hashValue
	for i := 0; i < d.handSize; i++ {
		radix := uint64(d.deckSize - i)
		digits[i] = v % radix
		v /= radix
		card := digits[i]
		for j := i; j > 0; j-- {
			if card >= digits[j-1] {
				card++
			}
		}
		pick(int(card))
	}
}

// DealIntoHand deals hashValue's hand into hand, reusing its storage when the
// capacity suffices, and returns it with length HandSize.
func (d *Dealer) DealIntoHand(hashValue uint64, hand []int) []int {
	if cap(hand) < d.handSize {
		hand = make([]int, d.handSize)
	}
	hand = hand[:d.handSize]
	i := 0
	d.Deal(hashValue, func(card int) { hand[i] = card; i++ })
	return hand
}
