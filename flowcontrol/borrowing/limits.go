package borrowing

import "math"

// Level is the borrowing-relevant part of a priority level's configuration.
type Level struct {
	Name string
	// Exempt levels are never limited, but their seats are taken off the top.
	Exempt bool
	// NominalConcurrencyShares is the level's share of ServerCL.
	NominalConcurrencyShares int
	// LendablePercent of the nominal limit may be lent to other levels.
	LendablePercent int
	// BorrowingLimitPercent bounds borrowing as a percentage of the nominal
	// limit; nil means unlimited (up to ServerCL).
	BorrowingLimitPercent *int
}

// Limits are a level's static bounds, in seats.
type Limits struct {
	Nominal   int
	Lendable  int
	Borrowing int
	Min       int // Nominal − Lendable
	Max       int // Nominal + Borrowing
}

// ComputeLimits returns each level's limits for a server concurrency limit,
// and the sum of the nominal limits (which may exceed serverCL by rounding).
func ComputeLimits(serverCL int, levels []Level) ([]Limits, int) {
	shareSum := 0
	for _, l := range levels {
		shareSum += l.NominalConcurrencyShares
	}
	out := make([]Limits, len(levels))
	sum := 0
	for i, l := range levels {
		var lim Limits
		if shareSum > 0 {
			lim.Nominal = int(math.Ceil(float64(serverCL) * float64(l.NominalConcurrencyShares) / float64(shareSum)))
		}
		lim.Lendable = int(math.Round(float64(lim.Nominal) * float64(l.LendablePercent) / 100))
		if l.BorrowingLimitPercent != nil {
			lim.Borrowing = int(math.Round(float64(lim.Nominal) * float64(*l.BorrowingLimitPercent) / 100))
		} else {
			lim.Borrowing = serverCL
		}
		lim.Min, lim.Max = lim.Nominal-lim.Lendable, lim.Nominal+lim.Borrowing
		out[i] = lim
		sum += lim.Nominal
	}
	return out, sum
}

// maxSeatsFraction of a level's nominal limit bounds the width of one request.
const maxSeatsFraction = 0.15

// MaxSeats returns the widest work estimate a queuing level allows:
// max(1, min(ceil(0.15 × nominalCL), nominalCL / handSize)). It keeps one flow
// of wide requests from starving the level (upstream #115409).
func MaxSeats(nominalCL, handSize int) int {
	if handSize < 1 {
		handSize = 1
	}
	return max(1, min(int(math.Ceil(float64(nominalCL)*maxSeatsFraction)), nominalCL/handSize))
}
