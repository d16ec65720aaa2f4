package main

// The stages that register themselves with internal/host, and the
// actuation targets that register with the actuator: one line each.
import (
	_ "github.com/pace-platform/pace/stages/actuator"
	_ "github.com/pace-platform/pace/stages/collector"
	_ "github.com/pace-platform/pace/stages/controller"
	_ "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
	_ "github.com/pace-platform/pace/stages/gate/targets/local"
	_ "github.com/pace-platform/pace/stages/processor"
	_ "github.com/pace-platform/pace/stages/sink"
)
