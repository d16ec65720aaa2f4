package schemas

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Failure rules a job's FailurePolicy may turn off.
const (
	// RuleBeforeFirstResult fails a job whose workers fail
	// FailurePolicy.BeforeFirstResult times before its first result.
	RuleBeforeFirstResult = "before_first_result"
	// RuleStall fails a job that makes no progress for FailurePolicy.Stall
	// while it has work and workers.
	RuleStall = "stall"
	// RulePods fails a job run on Kubernetes whose Job has failed, or all
	// of whose pods have been stuck (an image that cannot be pulled, a
	// container in CrashLoopBackOff, a pod that cannot be scheduled) for
	// FailurePolicy.Pods.
	RulePods = "pods"
)

// Defaults of FailurePolicy.
const (
	DefaultBeforeFirstResult = 3
	DefaultStall             = 5 * time.Minute
	DefaultPods              = 2 * time.Minute
	// StallItemTimeouts is the least stall, in item timeouts: a job whose
	// items may each take long is not failed for one slow item.
	StallItemTimeouts = 10
)

// FailurePolicy says when a running job is failed rather than left to run:
// its workers break before doing anything, or it stops making progress.
// Each rule has a default and can be turned off (Disable).
type FailurePolicy struct {
	// BeforeFirstResult is how many worker failures (a replica that exits
	// on its own, or whose command fails on every item it gets) before the
	// job's first result fail it. Default 3.
	BeforeFirstResult int `json:"before_first_result,omitempty"`
	// Stall is how long a job with queued or running items and workers may
	// make no progress (no new result or dead letter). Default the longer of
	// 5 minutes and 10 item timeouts.
	Stall Duration `json:"stall,omitempty"`
	// Pods is how long all of a Kubernetes job's pods may be stuck before
	// it fails. Default 2 minutes.
	Pods Duration `json:"pods,omitempty"`
	// Disable lists the rules turned off: before_first_result, stall, pods.
	Disable []string `json:"disable,omitempty"`
}

// IsZero reports whether p sets nothing.
func (p FailurePolicy) IsZero() bool {
	return p.BeforeFirstResult == 0 && p.Stall == 0 && p.Pods == 0 && len(p.Disable) == 0
}

// On reports whether rule is enabled.
func (p FailurePolicy) On(rule string) bool { return !slices.Contains(p.Disable, rule) }

// withDefaults fills the rules left unset; itemTimeout is the job's.
func (p FailurePolicy) withDefaults(itemTimeout Duration) FailurePolicy {
	if p.BeforeFirstResult == 0 {
		p.BeforeFirstResult = DefaultBeforeFirstResult
	}
	if p.Stall == 0 {
		p.Stall = Duration(max(DefaultStall, StallItemTimeouts*itemTimeout.D()))
	}
	if p.Pods == 0 {
		p.Pods = Duration(DefaultPods)
	}
	return p
}

func (p FailurePolicy) validate(path *field.Path) (errs field.ErrorList) {
	if p.BeforeFirstResult < 0 {
		errs = append(errs, field.Invalid(path.Child("before_first_result"), p.BeforeFirstResult,
			"must be >= 1 (turn the rule off with disable)"))
	}
	if p.Stall < 0 {
		errs = append(errs, field.Invalid(path.Child("stall"), p.Stall.D().String(), "must be positive (turn the rule off with disable)"))
	}
	if p.Pods < 0 {
		errs = append(errs, field.Invalid(path.Child("pods"), p.Pods.D().String(), "must be positive (turn the rule off with disable)"))
	}
	rules := []string{RuleBeforeFirstResult, RuleStall, RulePods}
	for i, r := range p.Disable {
		if !slices.Contains(rules, r) {
			errs = append(errs, field.NotSupported(path.Child("disable").Index(i), r, rules))
		}
	}
	return errs
}
