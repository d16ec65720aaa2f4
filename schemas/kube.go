package schemas

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// KubeRequest is an infrastructure operation waiting for the APF gate, on
// pace.k8s.requests. Its attributes are those APF classifies on.
type KubeRequest struct {
	ID  string `json:"id"`
	Job string `json:"job,omitempty"`
	// User and Groups identify who asks (the job owner).
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// Verb, APIGroup, Resource, Subresource, Namespace and Name describe a
	// resource request; Path a non-resource request.
	Verb        string `json:"verb"`
	APIGroup    string `json:"api_group,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	Path        string `json:"path,omitempty"`
	// Replicas is the desired count for scale operations.
	Replicas int       `json:"replicas,omitempty"`
	At       time.Time `json:"at"`
	// Reason says why the request was made: the controller and its
	// decision's reason for a scale, or the job's event. The job's scaled
	// event carries it.
	Reason string `json:"reason,omitempty"`
}

// Schema implements Message.
func (*KubeRequest) Schema() (string, int) { return "kube_request", 1 }

// Validate implements Message.
func (r *KubeRequest) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("id"), r.ID)
	if r.Job != "" {
		errs = validateToken(errs, field.NewPath("job"), r.Job)
	}
	if r.User == "" {
		errs = append(errs, field.Required(field.NewPath("user"), ""))
	}
	if r.Verb == "" {
		errs = append(errs, field.Required(field.NewPath("verb"), ""))
	}
	if (r.Resource == "") == (r.Path == "") {
		errs = append(errs, field.Invalid(field.NewPath("resource"), r.Resource, "exactly one of resource and path must be set"))
	}
	errs = nonNegative(errs, field.NewPath("replicas"), r.Replicas)
	if r.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	return errs
}

// OutcomeStatus is what became of a KubeRequest.
type OutcomeStatus string

// Outcome statuses.
const (
	Applied  OutcomeStatus = "applied"
	Rejected OutcomeStatus = "rejected"
	Failure  OutcomeStatus = "failed"
)

// KubeOutcome reports an executed (or refused) KubeRequest, on pace.k8s.outcomes.
type KubeOutcome struct {
	RequestID string        `json:"request_id"`
	Job       string        `json:"job,omitempty"`
	Status    OutcomeStatus `json:"status"`
	// Replicas is the replica count observed after the operation.
	Replicas int       `json:"replicas,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// Schema implements Message.
func (*KubeOutcome) Schema() (string, int) { return "kube_outcome", 1 }

// Validate implements Message.
func (o *KubeOutcome) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("request_id"), o.RequestID)
	if o.Job != "" {
		errs = validateToken(errs, field.NewPath("job"), o.Job)
	}
	switch o.Status {
	case Applied, Rejected, Failure:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("status"), o.Status, []OutcomeStatus{Applied, Rejected, Failure}))
	}
	errs = nonNegative(errs, field.NewPath("replicas"), o.Replicas)
	if o.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	return errs
}
