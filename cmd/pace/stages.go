package main

// The stages that register themselves with internal/host: one line a stage.
import (
	_ "github.com/pace-platform/pace/stages/actuator"
	_ "github.com/pace-platform/pace/stages/collector"
	_ "github.com/pace-platform/pace/stages/controller"
	_ "github.com/pace-platform/pace/stages/processor"
	_ "github.com/pace-platform/pace/stages/sink"
)
