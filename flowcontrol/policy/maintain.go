package policy

import (
	"maps"
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
	mand, sugg := Mandatory(), Suggested()
	plUpserts, plDeletes := maintainKind(mand.PriorityLevels, sugg.PriorityLevels, current.PriorityLevels,
		func(pl *flowcontrolv1.PriorityLevelConfiguration) any { return &pl.Spec },
		func(dst, src *flowcontrolv1.PriorityLevelConfiguration) { dst.Spec = src.Spec },
		func(op Op, pl *flowcontrolv1.PriorityLevelConfiguration) Change {
			return Change{Op: op, PriorityLevel: pl}
		})
	fsUpserts, fsDeletes := maintainKind(mand.FlowSchemas, sugg.FlowSchemas, current.FlowSchemas,
		func(fs *flowcontrolv1.FlowSchema) any { return &fs.Spec },
		func(dst, src *flowcontrolv1.FlowSchema) { dst.Spec = src.Spec },
		func(op Op, fs *flowcontrolv1.FlowSchema) Change { return Change{Op: op, FlowSchema: fs} })
	return slices.Concat(plUpserts, fsUpserts, plDeletes, fsDeletes)
}

// object is a FlowSchema or a PriorityLevelConfiguration.
type object[E any] interface {
	*E
	metav1.Object
	DeepCopy() *E
}

// maintainKind plans the maintenance of one kind of object: the creates and
// updates that keep the mandatory and suggested objects as Maintain says,
// and the deletes of the other stored objects marked auto-update. spec
// points to an object's spec, setSpec copies one, change wraps an object in
// its Change.
func maintainKind[E any, P object[E]](mandatory, suggested, current []P, spec func(P) any, setSpec func(dst, src P),
	change func(Op, P) Change) (upserts, deletes []Change) {
	stored := make(map[string]P, len(current))
	for _, o := range current {
		stored[o.GetName()] = o
	}
	known := map[string]bool{}
	for i, want := range slices.Concat(mandatory, suggested) {
		known[want.GetName()] = true
		have, ok := stored[want.GetName()]
		if !ok {
			want.SetGeneration(1)
			upserts = append(upserts, change(OpCreate, want))
			continue
		}
		next, ok := maintained(have, i < len(mandatory), equality.Semantic.DeepEqual(spec(have), spec(want)))
		if !ok {
			continue
		}
		upd := P(have.DeepCopy())
		upd.SetAnnotations(next.Annotations)
		upd.SetGeneration(next.Generation)
		if IsAutoUpdate(next) {
			setSpec(upd, want)
		}
		upserts = append(upserts, change(OpUpdate, upd))
	}
	for _, o := range current {
		if !known[o.GetName()] && o.GetAnnotations()[AutoUpdateAnnotation] == "true" {
			deletes = append(deletes, change(OpDelete, o))
		}
	}
	return upserts, deletes
}

// maintained returns the metadata a stored built-in object should have and
// whether anything (metadata or spec) must change. Mandatory objects are
// always auto-updated.
func maintained(meta metav1.Object, mandatory, specEqual bool) (next metav1.ObjectMeta, changed bool) {
	next = metav1.ObjectMeta{Annotations: maps.Clone(meta.GetAnnotations()), Generation: meta.GetGeneration()}
	auto := mandatory || IsAutoUpdate(next)
	want := "false"
	if auto {
		want = "true"
	}
	if next.Annotations[AutoUpdateAnnotation] == want && (specEqual || !auto) {
		return next, false
	}
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[AutoUpdateAnnotation] = want
	if auto && !specEqual {
		next.Generation++
	}
	return next, true
}
