package plugin

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Params is what NewBase needs of a plugin's parameters.
type Params interface {
	// Defaults fills the unset fields, some of them from the job.
	Defaults(job Job)
	// Validate checks the parameters once defaulted.
	Validate() field.ErrorList
}

// Base is what every controller plugin holds: its job, its parameters C
// (defaulted and valid) and its memory S between samples. A plugin embeds
// Base, which gives it Controller's State and Restore: the stage stores Mem,
// and a restarted controller resumes from it.
type Base[C, S any] struct {
	Job  Job
	Cfg  C
	Mem  S
	name string
}

// NewBase decodes params strictly into a C (nil or empty means all defaults),
// fills its defaults and validates it with the job's bounds; the memory
// starts as mem, and name is the plugin's, for errors. Errors wrap
// ErrInvalidConfig.
func NewBase[C any, P interface {
	*C
	Params
}, S any](name string, job Job, params json.RawMessage, mem S) (Base[C, S], error) {
	var cfg C
	if err := Decode(params, P(&cfg)); err != nil {
		return Base[C, S]{}, err
	}
	P(&cfg).Defaults(job)
	if err := Invalid(append(P(&cfg).Validate(), job.Validate()...)); err != nil {
		return Base[C, S]{}, err
	}
	return Base[C, S]{Job: job, Cfg: cfg, Mem: mem, name: name}, nil
}

// State implements Controller: Mem as JSON.
func (b *Base[C, S]) State() (json.RawMessage, error) { return json.Marshal(b.Mem) }

// Restore implements Controller: Mem becomes the state decoded from JSON, or
// stays as it was if that fails.
func (b *Base[C, S]) Restore(state json.RawMessage) error {
	var s S
	if err := json.Unmarshal(state, &s); err != nil {
		return fmt.Errorf("restore %s state: %w", b.name, err)
	}
	b.Mem = s
	return nil
}
