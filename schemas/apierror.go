package schemas

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// APIError is the error envelope of Pace's HTTP API and of its NATS
// request/reply subjects: Asperathos' {error_code, error_message,
// error_name} plus the list of invalid fields.
type APIError struct {
	Code    int          `json:"error_code"`
	Message string       `json:"error_message"`
	Name    string       `json:"error_name"`
	Details []FieldError `json:"details,omitempty"`
	// RetryAfter, in seconds, says when a refusal for want of room may be
	// tried again (HTTP: the Retry-After header too).
	RetryAfter int `json:"retry_after,omitempty"`
}

// FieldError is one invalid field of a request, with its JSON path.
type FieldError struct {
	Field  string `json:"field"`
	Type   string `json:"type"`
	Detail string `json:"detail,omitempty"`
	Value  string `json:"value,omitempty"`
}

// Error implements error.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Code, e.Name, e.Message)
	for _, d := range e.Details {
		msg += fmt.Sprintf("\n  %s: %s", d.Field, d.Detail)
	}
	return msg
}

// FieldErrors converts a validation result to FieldErrors.
func FieldErrors(errs field.ErrorList) []FieldError {
	out := make([]FieldError, 0, len(errs))
	for _, e := range errs {
		fe := FieldError{Field: e.Field, Type: string(e.Type), Detail: e.ErrorBody()}
		if e.Detail != "" {
			fe.Detail = e.Detail
		}
		if e.BadValue != nil && e.Type != field.ErrorTypeRequired && e.Type != field.ErrorTypeForbidden {
			fe.Value = fmt.Sprint(e.BadValue)
		}
		out = append(out, fe)
	}
	return out
}
