package schemas

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Decision is a controller's output, on pace.decisions.<job>: published
// when the desired replicas change, and otherwise at most once per heartbeat
// with Unchanged set.
type Decision struct {
	Job string    `json:"job"`
	At  time.Time `json:"at"`
	// Replicas is the desired worker count; Current the count it was based on.
	Replicas int `json:"replicas"`
	Current  int `json:"current"`
	// Controller names the plugin that decided.
	Controller string `json:"controller,omitempty"`
	// Reason explains the decision in words.
	Reason string `json:"reason"`
	// Inputs are the values the decision was computed from.
	Inputs map[string]float64 `json:"inputs,omitempty"`
	// Unchanged marks a heartbeat: a decision keeping the replicas of the
	// job's last published one. The controller stage publishes a decision
	// when the replicas change and otherwise at most once per heartbeat
	// (default 30 s), so a reader knows the controller is alive.
	Unchanged bool `json:"unchanged,omitempty"`
}

// Schema implements Message.
func (*Decision) Schema() (string, int) { return "decision", 1 }

// Validate implements Message.
func (d *Decision) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), d.Job)
	errs = nonNegative(errs, field.NewPath("replicas"), d.Replicas)
	errs = nonNegative(errs, field.NewPath("current"), d.Current)
	if d.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	if d.Reason == "" {
		errs = append(errs, field.Required(field.NewPath("reason"), "every decision explains itself"))
	}
	return errs
}
