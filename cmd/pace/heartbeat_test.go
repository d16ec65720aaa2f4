package main

import (
	"testing"
	"time"
)

// TestDecisionHeartbeatFlag: --decision-heartbeat sets the controller's
// heartbeat, 0 meaning every decision, and refuses a negative value.
func TestDecisionHeartbeatFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag, want time.Duration
	}{{30 * time.Second, 30 * time.Second}, {5 * time.Minute, 5 * time.Minute}, {0, -1}} {
		f := stageFlags{heartbeat: tc.flag}
		if err := f.validateHeartbeat(); err != nil {
			t.Errorf("--decision-heartbeat %s: %v", tc.flag, err)
		}
		if got := f.controllerConfig().Heartbeat; got != tc.want {
			t.Errorf("--decision-heartbeat %s: heartbeat %s, want %s", tc.flag, got, tc.want)
		}
	}
	if err := (&stageFlags{heartbeat: -time.Second}).validateHeartbeat(); err == nil {
		t.Error("--decision-heartbeat -1s accepted")
	}
}
