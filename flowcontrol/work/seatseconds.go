package work

import (
	"fmt"
	"math"
	"time"
)

// SeatSeconds is an amount of work: seats multiplied by time. It is a
// fixed-point number whose unit is 1e-8 seat-seconds.
type SeatSeconds uint64

// MaxSeatSeconds is the largest representable amount of work.
const MaxSeatSeconds = SeatSeconds(math.MaxUint64)

// unitsPerSeatSecond is the fixed-point scale.
const unitsPerSeatSecond = 1e8

// SeatsTimesDuration returns seats×d rounded to the nearest unit. Like the
// upstream arithmetic the product goes through int64, so a negative duration
// wraps around; adding the result then subtracts.
func SeatsTimesDuration(seats float64, d time.Duration) SeatSeconds {
	return SeatSeconds(int64(math.Round(seats * float64(d) / (1e9 / unitsPerSeatSecond))))
}

// Float returns ss in seat-seconds.
func (ss SeatSeconds) Float() float64 { return float64(ss) / unitsPerSeatSecond }

// DurationPerSeat returns how long seats seats take to do the work ss.
func (ss SeatSeconds) DurationPerSeat(seats float64) time.Duration {
	return time.Duration(float64(ss) / seats * (float64(time.Second) / unitsPerSeatSecond))
}

// String formats ss exactly, e.g. "3.00000000ss".
func (ss SeatSeconds) String() string {
	const one = SeatSeconds(unitsPerSeatSecond)
	return fmt.Sprintf("%d.%08dss", ss/one, ss%one)
}
