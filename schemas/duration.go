package schemas

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
)

// Duration is a time.Duration written in JSON as a Go duration string
// ("1m30s"). A JSON number is read as seconds, for Asperathos-style clients.
type Duration time.Duration

// D converts d to a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of seconds. A value
// that is not zero but rounds to 0 (1e-10 seconds, "0.5ns") is refused
// rather than read as 0, which most fields take to mean their default.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case float64:
		// Converting an out-of-range float to an integer gives a
		// platform-dependent value: refuse it instead.
		if math.Abs(v) >= math.MaxInt64/float64(time.Second) {
			return fmt.Errorf("invalid duration %s: more than %d seconds", b, math.MaxInt64/int64(time.Second))
		}
		if ns := v * float64(time.Second); v != 0 && math.Abs(ns) < 1 {
			return fmt.Errorf("invalid duration %s: not zero, yet shorter than 1ns, the smallest duration", b)
		}
		*d = Duration(v * float64(time.Second))
	case string:
		p, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("invalid duration %q: want e.g. \"90s\" or \"1h30m\"", v)
		}
		if p == 0 && strings.ContainsAny(v, "123456789") {
			return fmt.Errorf("invalid duration %q: not zero, yet shorter than 1ns, the smallest duration", v)
		}
		*d = Duration(p)
	default:
		return fmt.Errorf("invalid duration %s: want a string such as \"90s\" or a number of seconds", b)
	}
	return nil
}

// JSONSchema describes Duration for the generated JSON Schema documents.
func (Duration) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		OneOf: []*jsonschema.Schema{
			{Type: "string", Pattern: `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`, Description: "Go duration, e.g. 90s or 1h30m"},
			{Type: "number", Description: "seconds"},
		},
	}
}
