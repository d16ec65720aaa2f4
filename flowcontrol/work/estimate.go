package work

import "time"

// Estimate is the expected cost of one request.
type Estimate struct {
	// InitialSeats are held while the request executes (at least 1 for a real request).
	InitialSeats int `json:"initialSeats"`
	// FinalSeats are held for AdditionalLatency after execution ends, e.g. while
	// watch notifications caused by a write are sent.
	FinalSeats int `json:"finalSeats,omitempty"`
	// AdditionalLatency is the length of the final phase.
	AdditionalLatency time.Duration `json:"additionalLatency,omitempty"`
}

// MaxSeats returns the seats the request holds for its whole life.
func (e Estimate) MaxSeats() int { return max(e.InitialSeats, e.FinalSeats) }

// Completed is an Estimate with its work computed for a guessed service time.
type Completed struct {
	Estimate
	InitialWork SeatSeconds // InitialSeats × G
	FinalWork   SeatSeconds // FinalSeats × AdditionalLatency
}

// Complete computes the work of e when the initial phase is guessed to last g.
// Negative seat counts are treated as zero.
func Complete(e Estimate, g time.Duration) Completed {
	e.InitialSeats = max(e.InitialSeats, 0)
	e.FinalSeats = max(e.FinalSeats, 0)
	return Completed{
		Estimate:    e,
		InitialWork: SeatsTimesDuration(float64(e.InitialSeats), g),
		FinalWork:   SeatsTimesDuration(float64(e.FinalSeats), e.AdditionalLatency),
	}
}

// TotalWork returns the initial plus the final work.
func (c Completed) TotalWork() SeatSeconds { return c.InitialWork + c.FinalWork }

// ClampFinalSeats lowers FinalSeats to limit when they exceed it, stretching
// AdditionalLatency so that the final work stays the same. It reports whether
// anything changed.
func (c *Completed) ClampFinalSeats(limit int) bool {
	if c.FinalSeats <= limit || limit <= 0 {
		return false
	}
	c.FinalSeats = limit
	c.AdditionalLatency = c.FinalWork.DurationPerSeat(float64(limit))
	return true
}
