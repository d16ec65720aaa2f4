package policy

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
)

// The API defaults of flowcontrol.apiserver.k8s.io/v1.
const (
	DefaultMatchingPrecedence       = 1000
	DefaultNominalConcurrencyShares = 30
	DefaultQueues                   = 64
	DefaultHandSize                 = 8
	DefaultQueueLengthLimit         = 50
)

// SetDefaults applies the API server's defaulting to every object, in place:
// matchingPrecedence 1000; for Limited levels nominalConcurrencyShares 30 and
// lendablePercent 0 when omitted, and queues 64, handSize 8,
// queueLengthLimit 50 for omitted (zero) queuing fields; for Exempt levels an
// empty exempt block with shares and lendablePercent 0.
func SetDefaults(o *Objects) {
	for _, fs := range o.FlowSchemas {
		DefaultFlowSchema(fs)
	}
	for _, pl := range o.PriorityLevels {
		DefaultPriorityLevel(pl)
	}
}

// DefaultFlowSchema applies the API defaults to one FlowSchema.
func DefaultFlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = DefaultMatchingPrecedence
	}
}

// DefaultPriorityLevel applies the API defaults to one PriorityLevelConfiguration.
func DefaultPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) {
	s := &pl.Spec
	if s.Type == flowcontrolv1.PriorityLevelEnablementExempt && s.Exempt == nil {
		s.Exempt = &flowcontrolv1.ExemptPriorityLevelConfiguration{}
	}
	if e := s.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr(int32(0))
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr(int32(0))
		}
	}
	if l := s.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = ptr(int32(DefaultNominalConcurrencyShares))
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr(int32(0))
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.Queues == 0 {
				q.Queues = DefaultQueues
			}
			if q.HandSize == 0 {
				q.HandSize = DefaultHandSize
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = DefaultQueueLengthLimit
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
