// Package builtin lists the controller plugins compiled into Pace. It
// imports no stage, so the manager lists the plugins' names without the
// controller stage.
package builtin

import (
	"maps"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/deadline"
	"github.com/pace-platform/pace/stages/controller/plugin/hpa"
	"github.com/pace-platform/pace/stages/controller/plugin/pid"
	"github.com/pace-platform/pace/stages/controller/plugin/threshold"
)

// DefaultName is the controller of a native job spec that names none.
const DefaultName = schemas.DefaultController

var registry = plugin.Registry{
	threshold.Name: threshold.New, // Asperathos "default"
	pid.Name:       pid.New,       // Asperathos "pid"
	deadline.Name:  deadline.New,  // Pace's own
	hpa.Name:       hpa.New,       // KEDA/HPA-style baseline
}

// Registry returns a copy of the built-in registry, which callers may extend.
func Registry() plugin.Registry { return maps.Clone(registry) }
