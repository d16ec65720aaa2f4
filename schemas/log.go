package schemas

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// LogLine is one line of a job's log, on pace.logs.<job>.
type LogLine struct {
	Job string    `json:"job"`
	At  time.Time `json:"at"`
	// Source names the writer, e.g. "manager" or a worker id.
	Source string `json:"source,omitempty"`
	Line   string `json:"line"`
}

// Schema implements Message.
func (*LogLine) Schema() (string, int) { return "log_line", 1 }

// Validate implements Message.
func (l *LogLine) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), l.Job)
	if l.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	return errs
}
