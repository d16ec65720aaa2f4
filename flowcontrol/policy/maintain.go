package policy

import (
	"slices"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Op is a maintenance operation.
type Op string

// The maintenance operations.
const (
	OpCreate Op = "create"
	OpUpdate Op = "update"
	OpDelete Op = "delete"
)

// Change is one maintenance step on one object; exactly one of FlowSchema and
// PriorityLevel is set (for OpDelete, the stored object).
type Change struct {
	Op            Op
	FlowSchema    *flowcontrolv1.FlowSchema
	PriorityLevel *flowcontrolv1.PriorityLevelConfiguration
}

// Key names the changed object: "flowschemas.NAME" or "prioritylevels.NAME".
func (c Change) Key() string {
	if c.FlowSchema != nil {
		return FlowSchemaKey(c.FlowSchema.Name)
	}
	return PriorityLevelKey(c.PriorityLevel.Name)
}

// FlowSchemaKey and PriorityLevelKey are the keys of objects in a store.
func FlowSchemaKey(name string) string { return "flowschemas." + name }

// PriorityLevelKey is the store key of a priority level.
func PriorityLevelKey(name string) string { return "prioritylevels." + name }

// Maintain returns what kube-apiserver's config maintenance would change in
// current (the stored objects):
//   - mandatory objects are created when missing and their spec restored;
//   - suggested objects are created when missing, and kept equal to the
//     default while auto-update holds (annotation "true", or absent with
//     generation 1); user-owned ones are left alone, except that a missing
//     annotation is set to "false";
//   - other objects annotated autoupdate-spec=true are deleted.
//
// The plan is deterministic and empty for a maintained set, so instances
// running it concurrently converge instead of thrashing.
func Maintain(current Objects) []Change {
	var out []Change
	mand, sugg := Mandatory(), Suggested()
	fsByName := map[string]*flowcontrolv1.FlowSchema{}
	for _, fs := range current.FlowSchemas {
		fsByName[fs.Name] = fs
	}
	plByName := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range current.PriorityLevels {
		plByName[pl.Name] = pl
	}
	known := map[string]bool{}
	for i, want := range append(slices.Clone(mand.PriorityLevels), sugg.PriorityLevels...) {
		known[PriorityLevelKey(want.Name)] = true
		have := plByName[want.Name]
		if have == nil {
			want.Generation = 1
			out = append(out, Change{Op: OpCreate, PriorityLevel: want})
			continue
		}
		if next, ok := maintained(have.ObjectMeta, i < len(mand.PriorityLevels), equality.Semantic.DeepEqual(have.Spec, want.Spec)); ok {
			upd := have.DeepCopy()
			upd.ObjectMeta = next
			if IsAutoUpdate(next) {
				upd.Spec = want.Spec
			}
			out = append(out, Change{Op: OpUpdate, PriorityLevel: upd})
		}
	}
	for i, want := range append(slices.Clone(mand.FlowSchemas), sugg.FlowSchemas...) {
		known[FlowSchemaKey(want.Name)] = true
		have := fsByName[want.Name]
		if have == nil {
			want.Generation = 1
			out = append(out, Change{Op: OpCreate, FlowSchema: want})
			continue
		}
		if next, ok := maintained(have.ObjectMeta, i < len(mand.FlowSchemas), equality.Semantic.DeepEqual(have.Spec, want.Spec)); ok {
			upd := have.DeepCopy()
			upd.ObjectMeta = next
			if IsAutoUpdate(next) {
				upd.Spec = want.Spec
			}
			out = append(out, Change{Op: OpUpdate, FlowSchema: upd})
		}
	}
	for _, pl := range current.PriorityLevels {
		if !known[PriorityLevelKey(pl.Name)] && pl.Annotations[AutoUpdateAnnotation] == "true" {
			out = append(out, Change{Op: OpDelete, PriorityLevel: pl})
		}
	}
	for _, fs := range current.FlowSchemas {
		if !known[FlowSchemaKey(fs.Name)] && fs.Annotations[AutoUpdateAnnotation] == "true" {
			out = append(out, Change{Op: OpDelete, FlowSchema: fs})
		}
	}
	return out
}

// maintained returns the metadata a stored built-in object should have and
// whether anything (metadata or spec) must change. Mandatory objects are
// always auto-updated.
func maintained(meta metav1.ObjectMeta, mandatory, specEqual bool) (metav1.ObjectMeta, bool) {
	auto := mandatory || IsAutoUpdate(meta)
	want := "false"
	if auto {
		want = "true"
	}
	if meta.Annotations[AutoUpdateAnnotation] == want && (specEqual || !auto) {
		return meta, false
	}
	next := *meta.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[AutoUpdateAnnotation] = want
	if auto && !specEqual {
		next.Generation++
	}
	return next, true
}
