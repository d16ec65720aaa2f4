package main

// The stages, which register themselves with internal/host, and the
// actuation targets, which register with the gate: one line each.
import (
	_ "github.com/pace-platform/pace/stages/actuator"
	_ "github.com/pace-platform/pace/stages/collector"
	_ "github.com/pace-platform/pace/stages/controller"
	_ "github.com/pace-platform/pace/stages/gate"
	_ "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
	_ "github.com/pace-platform/pace/stages/gate/targets/local"
	_ "github.com/pace-platform/pace/stages/manager"
	_ "github.com/pace-platform/pace/stages/processor"
	_ "github.com/pace-platform/pace/stages/sink"
	_ "github.com/pace-platform/pace/stages/visualizer"
)
