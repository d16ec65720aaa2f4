package policy_test

import (
	"bytes"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

// FuzzLoad feeds policy.Load with arbitrary YAML. It refuses a document
// with field errors that name their paths, or accepts objects that are
// valid, already defaulted, and render as YAML that loads back to the same
// objects and renders again unchanged.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := policy.Load(bytes.NewReader(data))
		if err != nil {
			requireFieldPaths(t, err)
			return
		}
		if errs := objs.Validate(); len(errs) > 0 {
			t.Fatalf("Load accepted invalid objects: %v", errs)
		}
		again := deepCopy(objs)
		policy.SetDefaults(&again)
		if !equality.Semantic.DeepEqual(objs, again) {
			t.Fatalf("defaulting a loaded config changed it:\n%s\nthen:\n%s", render(t, objs), render(t, again))
		}
		out := render(t, objs)
		back, err := policy.Load(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("the rendering of an accepted config is refused: %v\n%s", err, out)
		}
		if len(back.FlowSchemas) != len(objs.FlowSchemas) || len(back.PriorityLevels) != len(objs.PriorityLevels) {
			t.Fatalf("round trip changed the object counts:\n%s", out)
		}
		for i, fs := range objs.FlowSchemas {
			if b := back.FlowSchemas[i]; b.Name != fs.Name || !equality.Semantic.DeepEqual(b.Spec, fs.Spec) {
				t.Fatalf("round trip changed FlowSchema %q:\n%s", fs.Name, out)
			}
		}
		for i, pl := range objs.PriorityLevels {
			if b := back.PriorityLevels[i]; b.Name != pl.Name || !equality.Semantic.DeepEqual(b.Spec, pl.Spec) {
				t.Fatalf("round trip changed PriorityLevelConfiguration %q:\n%s", pl.Name, out)
			}
		}
		if again := render(t, back); !bytes.Equal(again, out) {
			t.Fatalf("rendering is not a fixed point:\n%s\nthen:\n%s", out, again)
		}
	})
}

// requireFieldPaths fails t unless err lists field errors, each with a path.
func requireFieldPaths(t *testing.T, err error) {
	t.Helper()
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("error is not a list of field errors: %T %v", err, err)
	}
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) || fe.Field == "" {
			t.Fatalf("error without a field path: %T %v", e, e)
		}
	}
}

func deepCopy(o policy.Objects) policy.Objects {
	var c policy.Objects
	for _, fs := range o.FlowSchemas {
		c.FlowSchemas = append(c.FlowSchemas, fs.DeepCopy())
	}
	for _, pl := range o.PriorityLevels {
		c.PriorityLevels = append(c.PriorityLevels, pl.DeepCopy())
	}
	return c
}

func render(t *testing.T, o policy.Objects) []byte {
	t.Helper()
	b, err := o.Marshal()
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return b
}
