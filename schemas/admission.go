package schemas

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AdmissionOutcome is what APF did with a request.
type AdmissionOutcome string

// Admission outcomes.
const (
	Dispatched AdmissionOutcome = "dispatched"
	Refused    AdmissionOutcome = "rejected"
)

// AdmissionEvent records one APF decision, on pace.admission.<level>.<schema>.
type AdmissionEvent struct {
	RequestID     string           `json:"request_id,omitempty"`
	PriorityLevel string           `json:"priority_level"`
	FlowSchema    string           `json:"flow_schema"`
	Flow          string           `json:"flow,omitempty"`
	Outcome       AdmissionOutcome `json:"outcome"`
	// Reason is the rejection reason: queue-full, concurrency-limit, time-out or cancelled.
	Reason string `json:"reason,omitempty"`
	Seats  int    `json:"seats,omitempty"`
	// Wait is how long the request queued.
	Wait Duration  `json:"wait,omitempty"`
	At   time.Time `json:"at"`
}

// Schema implements Message.
func (*AdmissionEvent) Schema() (string, int) { return "admission_event", 1 }

// Validate implements Message.
func (e *AdmissionEvent) Validate() field.ErrorList {
	var errs field.ErrorList
	if e.PriorityLevel == "" {
		errs = append(errs, field.Required(field.NewPath("priority_level"), ""))
	}
	if e.FlowSchema == "" {
		errs = append(errs, field.Required(field.NewPath("flow_schema"), ""))
	}
	switch e.Outcome {
	case Dispatched:
	case Refused:
		if e.Reason == "" {
			errs = append(errs, field.Required(field.NewPath("reason"), "a rejection names its reason"))
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("outcome"), e.Outcome, []AdmissionOutcome{Dispatched, Refused}))
	}
	errs = nonNegative(errs, field.NewPath("seats"), e.Seats)
	errs = nonNegativeDuration(errs, field.NewPath("wait"), e.Wait)
	if e.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	return errs
}
