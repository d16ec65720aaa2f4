package controller

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestDecisionHeartbeatFlag: --decision-heartbeat sets the controller's
// heartbeat, 0 meaning every decision, and refuses a negative value.
func TestDecisionHeartbeatFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag string
		want time.Duration
		ok   bool
	}{{"", DefaultHeartbeat, true}, {"5m", 5 * time.Minute, true}, {"0", -1, true}, {"-1s", 0, false}} {
		s := &command{}
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		s.Flags(fs)
		args := []string{}
		if tc.flag != "" {
			args = append(args, "--decision-heartbeat="+tc.flag)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		err := s.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("--decision-heartbeat %q: error %v, want ok=%v", tc.flag, err, tc.ok)
			continue
		}
		if tc.ok && s.config().Heartbeat != tc.want {
			t.Errorf("--decision-heartbeat %q: heartbeat %s, want %s", tc.flag, s.config().Heartbeat, tc.want)
		}
	}
}
