package policy_test

import (
	"testing"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

// apply is a tiny in-memory store for maintenance plans.
func apply(objs policy.Objects, changes []policy.Change) policy.Objects {
	fs := map[string]int{}
	for i, f := range objs.FlowSchemas {
		fs[f.Name] = i
	}
	pl := map[string]int{}
	for i, p := range objs.PriorityLevels {
		pl[p.Name] = i
	}
	out := policy.Objects{}
	deleted := map[string]bool{}
	for _, c := range changes {
		switch {
		case c.Op == policy.OpDelete:
			deleted[c.Key()] = true
		case c.FlowSchema != nil:
			if i, ok := fs[c.FlowSchema.Name]; ok {
				objs.FlowSchemas[i] = c.FlowSchema
			} else {
				objs.FlowSchemas = append(objs.FlowSchemas, c.FlowSchema)
			}
		default:
			if i, ok := pl[c.PriorityLevel.Name]; ok {
				objs.PriorityLevels[i] = c.PriorityLevel
			} else {
				objs.PriorityLevels = append(objs.PriorityLevels, c.PriorityLevel)
			}
		}
	}
	for _, f := range objs.FlowSchemas {
		if !deleted[policy.FlowSchemaKey(f.Name)] {
			out.FlowSchemas = append(out.FlowSchemas, f)
		}
	}
	for _, p := range objs.PriorityLevels {
		if !deleted[policy.PriorityLevelKey(p.Name)] {
			out.PriorityLevels = append(out.PriorityLevels, p)
		}
	}
	return out
}

func find(objs policy.Objects, name string) int {
	for i, f := range objs.FlowSchemas {
		if f.Name == name {
			return i
		}
	}
	return -1
}

func TestMaintain(t *testing.T) {
	// From nothing, everything is created, and then the set is stable.
	objs := apply(policy.Objects{}, policy.Maintain(policy.Objects{}))
	d := policy.Defaults()
	if len(objs.FlowSchemas) != len(d.FlowSchemas) || len(objs.PriorityLevels) != len(d.PriorityLevels) {
		t.Fatalf("created %d/%d, want %d/%d", len(objs.FlowSchemas), len(objs.PriorityLevels), len(d.FlowSchemas), len(d.PriorityLevels))
	}
	if ch := policy.Maintain(objs); len(ch) != 0 {
		t.Fatalf("maintained set changes again: %+v", ch)
	}

	// A suggested schema edited while auto-update holds is restored.
	i := find(objs, "global-default")
	objs.FlowSchemas[i].Spec.MatchingPrecedence = 42
	objs = apply(objs, policy.Maintain(objs))
	if got := objs.FlowSchemas[find(objs, "global-default")].Spec.MatchingPrecedence; got != 9900 {
		t.Errorf("auto-updated global-default precedence %d, want 9900", got)
	}

	// A user-owned one (annotation false) is left alone.
	i = find(objs, "service-accounts")
	objs.FlowSchemas[i].Annotations[policy.AutoUpdateAnnotation] = "false"
	objs.FlowSchemas[i].Spec.MatchingPrecedence = 42
	if ch := policy.Maintain(objs); len(ch) != 0 {
		t.Errorf("user-owned schema changed: %+v", ch)
	}

	// No annotation and generation > 1: user-owned, annotated false, spec kept.
	i = find(objs, "probes")
	delete(objs.FlowSchemas[i].Annotations, policy.AutoUpdateAnnotation)
	objs.FlowSchemas[i].Generation = 2
	objs.FlowSchemas[i].Spec.MatchingPrecedence = 7
	objs = apply(objs, policy.Maintain(objs))
	if fs := objs.FlowSchemas[find(objs, "probes")]; fs.Annotations[policy.AutoUpdateAnnotation] != "false" || fs.Spec.MatchingPrecedence != 7 {
		t.Errorf("probes: annotation %q precedence %d, want false and 7", fs.Annotations[policy.AutoUpdateAnnotation], fs.Spec.MatchingPrecedence)
	}

	// Mandatory ones are always restored, even when annotated false.
	i = find(objs, "catch-all")
	objs.FlowSchemas[i].Annotations[policy.AutoUpdateAnnotation] = "false"
	objs.FlowSchemas[i].Spec.MatchingPrecedence = 5000
	objs = apply(objs, policy.Maintain(objs))
	if fs := objs.FlowSchemas[find(objs, "catch-all")]; fs.Spec.MatchingPrecedence != 10000 || fs.Annotations[policy.AutoUpdateAnnotation] != "true" {
		t.Errorf("catch-all not restored: %d %v", fs.Spec.MatchingPrecedence, fs.Annotations)
	}

	// Deleted suggested objects come back; unknown auto-updated ones go.
	objs.FlowSchemas = append(objs.FlowSchemas[:find(objs, "system-nodes")], objs.FlowSchemas[find(objs, "system-nodes")+1:]...)
	stale := objs.FlowSchemas[find(objs, "global-default")].DeepCopy()
	stale.Name = "retired-default"
	custom := objs.FlowSchemas[find(objs, "global-default")].DeepCopy()
	custom.Name = "mine"
	delete(custom.Annotations, policy.AutoUpdateAnnotation)
	objs.FlowSchemas = append(objs.FlowSchemas, stale, custom)
	objs = apply(objs, policy.Maintain(objs))
	if find(objs, "system-nodes") < 0 || find(objs, "retired-default") >= 0 || find(objs, "mine") < 0 {
		t.Errorf("system-nodes %d, retired-default %d, mine %d", find(objs, "system-nodes"), find(objs, "retired-default"), find(objs, "mine"))
	}
	if ch := policy.Maintain(objs); len(ch) != 0 {
		t.Errorf("not stable: %+v", ch)
	}
}
