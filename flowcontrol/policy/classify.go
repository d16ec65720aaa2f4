package policy

import (
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/shufflesharding"
)

// Attributes describe a request for classification: who makes it and what it
// asks for, as kube's user.Info and RequestInfo do.
type Attributes struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// IsResourceRequest selects the resource rules (Verb, APIGroup, Resource,
	// Subresource, Namespace, Name) over the non-resource rules (Verb, Path).
	IsResourceRequest bool   `json:"isResourceRequest"`
	Verb              string `json:"verb"`
	APIGroup          string `json:"apiGroup,omitempty"`
	APIVersion        string `json:"apiVersion,omitempty"`
	Resource          string `json:"resource,omitempty"`
	Subresource       string `json:"subresource,omitempty"`
	Namespace         string `json:"namespace,omitempty"`
	Name              string `json:"name,omitempty"`
	Path              string `json:"path,omitempty"`
}

// Classification is the outcome of classifying a request.
type Classification struct {
	FlowSchema    *flowcontrolv1.FlowSchema
	PriorityLevel *flowcontrolv1.PriorityLevelConfiguration
	// Distinguisher and Hash are set only for Queue levels with more than one
	// queue (kube computes them only there); otherwise "" and 0.
	Distinguisher string
	Hash          uint64
}

// Hand returns the queues the flow may use on its level (nil for levels that
// do not queue).
func (c Classification) Hand() []int {
	q := queuing(c.PriorityLevel)
	if q == nil {
		return nil
	}
	d, err := shufflesharding.NewDealer(int(q.Queues), int(q.HandSize))
	if err != nil {
		return nil
	}
	return d.DealIntoHand(c.Hash, nil)
}

func queuing(pl *flowcontrolv1.PriorityLevelConfiguration) *flowcontrolv1.QueuingConfiguration {
	if pl == nil || pl.Spec.Limited == nil || pl.Spec.Limited.LimitResponse.Type != flowcontrolv1.LimitResponseTypeQueue {
		return nil
	}
	return pl.Spec.Limited.LimitResponse.Queuing
}

// Digest is a compiled configuration: FlowSchemas in matching order, the
// priority levels they use, and what was ignored. It is immutable and safe
// for concurrent use.
type Digest struct {
	schemas []*flowcontrolv1.FlowSchema
	levels  []*flowcontrolv1.PriorityLevelConfiguration // name order
	byName  map[string]*flowcontrolv1.PriorityLevelConfiguration
	// Dangling names the FlowSchemas ignored because their priority level is
	// missing or broken.
	Dangling []string
	// Broken names the objects ignored because they are invalid.
	Broken []string
}

// Compile digests objects as kube-apiserver does: invalid priority levels
// and FlowSchemas are ignored (Broken), FlowSchemas whose level is missing are
// ignored (Dangling), missing mandatory objects are imagined (the exempt
// FlowSchema first, catch-all last), and the rest is sorted by
// (matchingPrecedence, name). Objects are not modified.
func Compile(objs Objects) *Digest {
	d := &Digest{byName: map[string]*flowcontrolv1.PriorityLevelConfiguration{}}
	for _, pl := range objs.PriorityLevels {
		if _, dup := d.byName[pl.Name]; dup || len(ValidatePriorityLevel(pl, field.NewPath(""))) > 0 {
			d.Broken = append(d.Broken, "PriorityLevelConfiguration/"+pl.Name)
			continue
		}
		d.byName[pl.Name] = pl
	}
	for _, m := range Mandatory().PriorityLevels {
		if _, ok := d.byName[m.Name]; !ok {
			d.byName[m.Name] = m
		}
	}
	seen := map[string]bool{}
	for _, fs := range objs.FlowSchemas {
		switch {
		case seen[fs.Name] || len(ValidateFlowSchema(fs, field.NewPath(""))) > 0:
			d.Broken = append(d.Broken, "FlowSchema/"+fs.Name)
			continue
		case d.byName[fs.Spec.PriorityLevelConfiguration.Name] == nil:
			d.Dangling = append(d.Dangling, fs.Name)
			continue
		}
		seen[fs.Name] = true
		d.schemas = append(d.schemas, fs)
	}
	slices.SortStableFunc(d.schemas, func(a, b *flowcontrolv1.FlowSchema) int {
		if a.Spec.MatchingPrecedence != b.Spec.MatchingPrecedence {
			return int(a.Spec.MatchingPrecedence - b.Spec.MatchingPrecedence)
		}
		return cmpString(a.Name, b.Name)
	})
	for _, m := range Mandatory().FlowSchemas {
		if seen[m.Name] {
			continue
		}
		if m.Name == flowcontrolv1.FlowSchemaNameExempt {
			d.schemas = append([]*flowcontrolv1.FlowSchema{m}, d.schemas...)
		} else {
			d.schemas = append(d.schemas, m)
		}
	}
	for _, pl := range d.byName {
		d.levels = append(d.levels, pl)
	}
	slices.SortFunc(d.levels, func(a, b *flowcontrolv1.PriorityLevelConfiguration) int { return cmpString(a.Name, b.Name) })
	return d
}

// FlowSchemas returns the FlowSchemas in use, in matching order.
func (d *Digest) FlowSchemas() []*flowcontrolv1.FlowSchema { return slices.Clone(d.schemas) }

// PriorityLevels returns the priority levels in use, by name.
func (d *Digest) PriorityLevels() []*flowcontrolv1.PriorityLevelConfiguration {
	return slices.Clone(d.levels)
}

// PriorityLevel returns the named level, or nil.
func (d *Digest) PriorityLevel(name string) *flowcontrolv1.PriorityLevelConfiguration {
	return d.byName[name]
}

// Classify returns the first FlowSchema matching a, its priority level and
// the flow. If nothing matches (impossible while catch-all exists), the
// catch-all schema is used.
func (d *Digest) Classify(a Attributes) Classification {
	var fs *flowcontrolv1.FlowSchema
	for _, s := range d.schemas {
		if matches(s, &a) {
			fs = s
			break
		}
	}
	if fs == nil {
		fs = mandatoryFlowSchema(flowcontrolv1.FlowSchemaNameCatchAll)
	}
	c := Classification{FlowSchema: fs, PriorityLevel: d.byName[fs.Spec.PriorityLevelConfiguration.Name]}
	if q := queuing(c.PriorityLevel); q != nil && q.Queues > 1 {
		c.Distinguisher = Distinguisher(fs, a)
		c.Hash = flowcontrol.HashFlow(fs.Name, c.Distinguisher)
	}
	return c
}

// Distinguisher returns the flow distinguisher of a under fs: the user name
// (ByUser), the namespace (ByNamespace, possibly empty) or "".
func Distinguisher(fs *flowcontrolv1.FlowSchema, a Attributes) string {
	if fs.Spec.DistinguisherMethod == nil {
		return ""
	}
	switch fs.Spec.DistinguisherMethod.Type {
	case flowcontrolv1.FlowDistinguisherMethodByUserType:
		return a.User
	case flowcontrolv1.FlowDistinguisherMethodByNamespaceType:
		return a.Namespace
	}
	return ""
}

// Matches reports whether any rule of fs matches a.
func Matches(fs *flowcontrolv1.FlowSchema, a Attributes) bool {
	return matches(fs, &a)
}

func matches(fs *flowcontrolv1.FlowSchema, a *Attributes) bool {
	for i := range fs.Spec.Rules {
		if matchesRule(&fs.Spec.Rules[i], a) {
			return true
		}
	}
	return false
}

func matchesRule(r *flowcontrolv1.PolicyRulesWithSubjects, a *Attributes) bool {
	subject := false
	for i := range r.Subjects {
		if matchesSubject(&r.Subjects[i], a) {
			subject = true
			break
		}
	}
	if !subject {
		return false
	}
	if a.IsResourceRequest {
		for i := range r.ResourceRules {
			if matchesResource(&r.ResourceRules[i], a) {
				return true
			}
		}
		return false
	}
	for i := range r.NonResourceRules {
		if matchesNonResource(&r.NonResourceRules[i], a) {
			return true
		}
	}
	return false
}

const serviceAccountPrefix = "system:serviceaccount:"

func matchesSubject(s *flowcontrolv1.Subject, a *Attributes) bool {
	switch s.Kind {
	case flowcontrolv1.SubjectKindUser:
		return s.User != nil && (s.User.Name == flowcontrolv1.NameAll || s.User.Name == a.User)
	case flowcontrolv1.SubjectKindGroup:
		return s.Group != nil && (s.Group.Name == flowcontrolv1.NameAll || slices.Contains(a.Groups, s.Group.Name))
	case flowcontrolv1.SubjectKindServiceAccount:
		if s.ServiceAccount == nil {
			return false
		}
		rest, ok := strings.CutPrefix(a.User, serviceAccountPrefix)
		if !ok {
			return false
		}
		ns, name, ok := strings.Cut(rest, ":")
		if !ok || ns != s.ServiceAccount.Namespace {
			return false
		}
		return s.ServiceAccount.Name == flowcontrolv1.NameAll || name == s.ServiceAccount.Name
	}
	return false
}

// wildcardOr reports whether list is exactly ["*"] or contains v.
func wildcardOr(list []string, v string) bool {
	return (len(list) == 1 && list[0] == "*") || slices.Contains(list, v)
}

func matchesResource(r *flowcontrolv1.ResourcePolicyRule, a *Attributes) bool {
	if !wildcardOr(r.Verbs, a.Verb) || !wildcardOr(r.APIGroups, a.APIGroup) || !matchesResourceName(r.Resources, a) {
		return false
	}
	if a.Namespace == "" {
		return r.ClusterScope
	}
	return wildcardOr(r.Namespaces, a.Namespace)
}

// matchesResourceName compares "resource" or "resource/subresource" with
// the rule's resources without building the joined string.
func matchesResourceName(list []string, a *Attributes) bool {
	if len(list) == 1 && list[0] == "*" {
		return true
	}
	for _, r := range list {
		if a.Subresource == "" {
			if r == a.Resource {
				return true
			}
			continue
		}
		if len(r) == len(a.Resource)+1+len(a.Subresource) && strings.HasPrefix(r, a.Resource) &&
			r[len(a.Resource)] == '/' && strings.HasSuffix(r, a.Subresource) {
			return true
		}
	}
	return false
}

func matchesNonResource(r *flowcontrolv1.NonResourcePolicyRule, a *Attributes) bool {
	if !wildcardOr(r.Verbs, a.Verb) {
		return false
	}
	for _, u := range r.NonResourceURLs {
		if u == "*" || u == a.Path {
			return true
		}
		prefix := strings.TrimSuffix(u, "*")
		if strings.HasSuffix(prefix, "/") {
			if strings.HasPrefix(a.Path, prefix) {
				return true
			}
		} else if len(a.Path) > len(prefix) && a.Path[len(prefix)] == '/' && strings.HasPrefix(a.Path, prefix) {
			return true
		}
	}
	return false
}
