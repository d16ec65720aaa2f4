package flowcontrol

import (
	"errors"
	"fmt"

	"github.com/pace-platform/pace/flowcontrol/shufflesharding"
)

// PriorityLevel configures one priority level, mirroring the fields of a
// Kubernetes PriorityLevelConfiguration.
type PriorityLevel struct {
	Name string `json:"name"`
	// Exempt levels admit everything at once; their seats still count.
	Exempt bool `json:"exempt,omitempty"`
	// NominalConcurrencyShares is the level's share of the server's seats.
	NominalConcurrencyShares int `json:"nominalConcurrencyShares"`
	// LendablePercent of the nominal seats may be lent to other levels.
	LendablePercent int `json:"lendablePercent,omitempty"`
	// BorrowingLimitPercent bounds borrowing; nil means unlimited.
	BorrowingLimitPercent *int `json:"borrowingLimitPercent,omitempty"`
	// Reject makes the level reject what does not fit instead of queuing it.
	Reject bool `json:"reject,omitempty"`
	// Queues, HandSize and QueueLengthLimit configure queuing (Queue levels).
	Queues           int `json:"queues,omitempty"`
	HandSize         int `json:"handSize,omitempty"`
	QueueLengthLimit int `json:"queueLengthLimit,omitempty"`
}

// Config is the configuration of a Controller.
type Config struct {
	// ServerConcurrencyLimit is the total number of seats (kube: max-requests-inflight
	// plus max-mutating-requests-inflight, 600 by default).
	ServerConcurrencyLimit int             `json:"serverConcurrencyLimit"`
	Levels                 []PriorityLevel `json:"levels"`
}

// Validate checks the configuration and returns every problem found.
func (c Config) Validate() error {
	var errs []error
	if c.ServerConcurrencyLimit <= 0 {
		errs = append(errs, fmt.Errorf("serverConcurrencyLimit: %d must be positive", c.ServerConcurrencyLimit))
	}
	seen := map[string]bool{}
	for i, l := range c.Levels {
		path := fmt.Sprintf("levels[%d]", i)
		switch {
		case l.Name == "":
			errs = append(errs, fmt.Errorf("%s.name: required", path))
		case seen[l.Name]:
			errs = append(errs, fmt.Errorf("%s.name: duplicate %q", path, l.Name))
		}
		seen[l.Name] = true
		if l.NominalConcurrencyShares < 0 || l.LendablePercent < 0 || l.LendablePercent > 100 ||
			(l.BorrowingLimitPercent != nil && *l.BorrowingLimitPercent < 0) {
			errs = append(errs, fmt.Errorf("%s: shares and percentages must be non-negative and lendablePercent at most 100", path))
		}
		if !l.Exempt && !l.Reject {
			if _, err := shufflesharding.NewDealer(l.Queues, l.HandSize); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
			}
			if l.QueueLengthLimit <= 0 {
				errs = append(errs, fmt.Errorf("%s.queueLengthLimit: %d must be positive", path, l.QueueLengthLimit))
			}
		}
	}
	return errors.Join(errs...)
}
