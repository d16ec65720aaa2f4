package local

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// TestFlagsNameTheBadValue: each of the local target's flags is refused on
// its own, with the value given, and local workers need a TCP listener.
func TestFlagsNameTheBadValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		natsURL string
		want    string
	}{
		{[]string{"--actuator=none", "--worker-grace=-1s"}, "", "--worker-grace -1s: must not be negative"},
		{[]string{"--actuator=none", "--max-local-replicas=0"}, "", "--max-local-replicas 0: must be at least 1"},
		{[]string{"--actuator=remote"}, "", `--actuator "remote": want local or none`},
		{nil, "", "--actuator local runs workers that connect over TCP: set --nats-listen (or --actuator none)"},
		{nil, "nats://127.0.0.1:4222", ""},
	}
	for _, tt := range tests {
		c := &command{}
		fs := pflag.NewFlagSet("gate", pflag.ContinueOnError)
		c.Flags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := c.Validate(targets.Workers{Workers: host.Workers{NATSURL: tt.natsURL}}); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%v: error %q, want %q", tt.args, got, tt.want)
		}
	}
}
