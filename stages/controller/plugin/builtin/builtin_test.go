package builtin

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

func TestRegistry(t *testing.T) {
	reg := Registry()
	if diff := cmp.Diff(schemas.BuiltinControllers(), reg.Names()); diff != "" { // what job specs may name
		t.Errorf("names (-want +got):\n%s", diff)
	}
	job := plugin.Job{Name: "j", Expected: time.Minute, Min: 1, Max: 4, Initial: 1}
	for _, name := range reg.Names() {
		if _, err := reg.New(name, job, nil); err != nil {
			t.Errorf("New(%s) with defaults: %v", name, err)
		}
	}
	_, err := reg.New("bogus", job, nil)
	if !errors.Is(err, plugin.ErrInvalidConfig) || !strings.Contains(err.Error(), `"deadline"`) {
		t.Errorf("unknown name: err = %v, want ErrInvalidConfig listing the known names", err)
	}
	delete(reg, "pid")
	if _, ok := registry["pid"]; !ok {
		t.Error("Registry returned the registry itself, not a copy")
	}
}
