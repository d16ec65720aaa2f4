package policy

import (
	"fmt"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/flowcontrol/shufflesharding"
)

// MaxMatchingPrecedence is the largest allowed matchingPrecedence.
const MaxMatchingPrecedence = 10000

const maxQueues = 10_000_000

var (
	supportedVerbs        = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}
	supportedSubjectKinds = []string{"Group", "ServiceAccount", "User"}
	supportedTypes        = []string{"Exempt", "Limited"}
	supportedResponses    = []string{"Queue", "Reject"}
	supportedDistinguish  = []string{"ByNamespace", "ByUser"}
)

// Validate checks every object as the API server does on create, plus
// duplicate names, and returns all problems with their field paths, each
// prefixed by the object's kind and name.
func (o Objects) Validate() field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, pl := range o.PriorityLevels {
		p := field.NewPath("priorityLevelConfigurations").Key(pl.Name)
		if seen["pl/"+pl.Name] {
			errs = append(errs, field.Duplicate(field.NewPath("priorityLevelConfigurations").Index(i).Child("metadata", "name"), pl.Name))
		}
		seen["pl/"+pl.Name] = true
		errs = append(errs, ValidatePriorityLevel(pl, p)...)
	}
	for i, fs := range o.FlowSchemas {
		p := field.NewPath("flowSchemas").Key(fs.Name)
		if seen["fs/"+fs.Name] {
			errs = append(errs, field.Duplicate(field.NewPath("flowSchemas").Index(i).Child("metadata", "name"), fs.Name))
		}
		seen["fs/"+fs.Name] = true
		errs = append(errs, ValidateFlowSchema(fs, p)...)
	}
	return errs
}

// ValidateFlowSchema validates one (defaulted) FlowSchema under root.
func ValidateFlowSchema(fs *flowcontrolv1.FlowSchema, root *field.Path) field.ErrorList {
	errs := validateName(fs.Name, root.Child("metadata", "name"))
	spec := root.Child("spec")
	s := fs.Spec
	switch {
	case s.MatchingPrecedence <= 0:
		errs = append(errs, field.Invalid(spec.Child("matchingPrecedence"), s.MatchingPrecedence, "must be a positive value"))
	case s.MatchingPrecedence > MaxMatchingPrecedence:
		errs = append(errs, field.Invalid(spec.Child("matchingPrecedence"), s.MatchingPrecedence, fmt.Sprintf("must not be greater than %d", MaxMatchingPrecedence)))
	case s.MatchingPrecedence == 1 && fs.Name != flowcontrolv1.FlowSchemaNameExempt:
		errs = append(errs, field.Invalid(spec.Child("matchingPrecedence"), s.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if d := s.DistinguisherMethod; d != nil && !slices.Contains(supportedDistinguish, string(d.Type)) {
		errs = append(errs, field.NotSupported(spec.Child("distinguisherMethod", "type"), d.Type, supportedDistinguish))
	}
	if s.PriorityLevelConfiguration.Name == "" {
		errs = append(errs, field.Required(spec.Child("priorityLevelConfiguration", "name"), "must reference a priority level"))
	} else {
		errs = append(errs, validateName(s.PriorityLevelConfiguration.Name, spec.Child("priorityLevelConfiguration", "name"))...)
	}
	for i, r := range s.Rules {
		errs = append(errs, validateRule(r, spec.Child("rules").Index(i))...)
	}
	if m := mandatoryFlowSchema(fs.Name); m != nil && !equality.Semantic.DeepEqual(fs.Spec, m.Spec) {
		errs = append(errs, field.Invalid(spec, "", fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
	}
	return errs
}

func validateRule(r flowcontrolv1.PolicyRulesWithSubjects, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Subjects) == 0 {
		errs = append(errs, field.Required(p.Child("subjects"), "subjects must contain at least one value"))
	}
	for i, s := range r.Subjects {
		errs = append(errs, validateSubject(s, p.Child("subjects").Index(i))...)
	}
	if len(r.ResourceRules) == 0 && len(r.NonResourceRules) == 0 {
		errs = append(errs, field.Required(p, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i, rr := range r.ResourceRules {
		errs = append(errs, validateResourceRule(rr, p.Child("resourceRules").Index(i))...)
	}
	for i, nr := range r.NonResourceRules {
		errs = append(errs, validateNonResourceRule(nr, p.Child("nonResourceRules").Index(i))...)
	}
	return errs
}

func validateSubject(s flowcontrolv1.Subject, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, name, kind string) {
		if set {
			errs = append(errs, field.Forbidden(p.Child(name), fmt.Sprintf("%s is forbidden when subject kind is not '%s'", name, kind)))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		if sa := s.ServiceAccount; sa == nil {
			errs = append(errs, field.Required(p.Child("serviceAccount"), "serviceAccount is required when subject kind is 'ServiceAccount'"))
		} else {
			if sa.Name == "" {
				errs = append(errs, field.Required(p.Child("serviceAccount", "name"), ""))
			} else if sa.Name != flowcontrolv1.NameAll {
				for _, msg := range apivalidation.ValidateServiceAccountName(sa.Name, false) {
					errs = append(errs, field.Invalid(p.Child("serviceAccount", "name"), sa.Name, msg))
				}
			}
			if sa.Namespace == "" {
				errs = append(errs, field.Required(p.Child("serviceAccount", "namespace"), "must specify namespace for service account"))
			} else {
				for _, msg := range apivalidation.ValidateNamespaceName(sa.Namespace, false) {
					errs = append(errs, field.Invalid(p.Child("serviceAccount", "namespace"), sa.Namespace, msg))
				}
			}
		}
		forbid(s.User != nil, "user", "User")
		forbid(s.Group != nil, "group", "Group")
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(p.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(p.Child("user", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		forbid(s.Group != nil, "group", "Group")
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(p.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(p.Child("group", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		forbid(s.User != nil, "user", "User")
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, supportedSubjectKinds))
	}
	return errs
}

func validateVerbs(verbs []string, p *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(p, "verbs must contain at least one value")}
	case slices.Contains(verbs, "*"):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(p, verbs, "if '*' is present, must not specify other verbs")}
		}
	default:
		for _, v := range verbs {
			if !slices.Contains(supportedVerbs, v) {
				return field.ErrorList{field.NotSupported(p, verbs, supportedVerbs)}
			}
		}
	}
	return nil
}

func validateResourceRule(r flowcontrolv1.ResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateVerbs(r.Verbs, p.Child("verbs"))
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(r.APIGroups) > 1 && slices.Contains(r.APIGroups, "*") {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(r.Resources) > 1 && slices.Contains(r.Resources, "*") {
		errs = append(errs, field.Invalid(p.Child("resources"), r.Resources, "if '*' is present, must not specify other resources"))
	}
	switch {
	case len(r.Namespaces) == 0 && !r.ClusterScope:
		errs = append(errs, field.Required(p.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
	case slices.Contains(r.Namespaces, "*"):
		if len(r.Namespaces) > 1 {
			errs = append(errs, field.Invalid(p.Child("namespaces"), r.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, ns := range r.Namespaces {
			for _, msg := range apivalidation.ValidateNamespaceName(ns, false) {
				errs = append(errs, field.Invalid(p.Child("namespaces").Index(i), ns, "each member of this list must be '*' or a DNS-1123 label; "+msg))
			}
		}
	}
	return errs
}

func validateNonResourceRule(r flowcontrolv1.NonResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateVerbs(r.Verbs, p.Child("verbs"))
	switch {
	case len(r.NonResourceURLs) == 0:
		errs = append(errs, field.Required(p.Child("nonResourceURLs"), "nonResourceURLs must contain at least one value"))
	case slices.Contains(r.NonResourceURLs, "*"):
		if len(r.NonResourceURLs) > 1 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range r.NonResourceURLs {
			if err := validateNonResourceURL(u, p.Child("nonResourceURLs").Index(i)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// validateNonResourceURL: a path starts with "/", has no spaces or "//", and
// "*" only as a final "/*".
func validateNonResourceURL(u string, p *field.Path) *field.Error {
	switch {
	case u == "":
		return field.Invalid(p, u, "must not be empty")
	case u == "/":
		return nil
	case !strings.HasPrefix(u, "/"):
		return field.Invalid(p, u, "must start with slash")
	case strings.Contains(u, " "):
		return field.Invalid(p, u, "must not contain white-space")
	case strings.Contains(u, "//"):
		return field.Invalid(p, u, "must not contain double slash")
	}
	if n := strings.Count(u, "*"); n > 1 || (n == 1 && !strings.HasSuffix(u, "/*")) {
		return field.Invalid(p, u, "wildcard can only do suffix matching")
	}
	return nil
}

// ValidatePriorityLevel validates one (defaulted) PriorityLevelConfiguration under root.
func ValidatePriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration, root *field.Path) field.ErrorList {
	errs := validateName(pl.Name, root.Child("metadata", "name"))
	spec := root.Child("spec")
	s := pl.Spec
	if (pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (s.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(spec.Child("type"), s.Type, "type must be 'Exempt' if and only if name is 'exempt'"))
	}
	switch s.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if s.Limited != nil {
			errs = append(errs, field.Forbidden(spec.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := s.Exempt; e != nil {
			errs = append(errs, validateShares(e.NominalConcurrencyShares, e.LendablePercent, nil, spec.Child("exempt"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if s.Exempt != nil {
			errs = append(errs, field.Forbidden(spec.Child("exempt"), "must be nil if the type is Limited"))
		}
		if s.Limited == nil {
			errs = append(errs, field.Required(spec.Child("limited"), "must not be empty when type is Limited"))
			break
		}
		l := s.Limited
		errs = append(errs, validateShares(l.NominalConcurrencyShares, l.LendablePercent, l.BorrowingLimitPercent, spec.Child("limited"))...)
		errs = append(errs, validateLimitResponse(l.LimitResponse, spec.Child("limited", "limitResponse"))...)
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), s.Type, supportedTypes))
	}
	if m := mandatoryPriorityLevel(pl.Name); m != nil && s.Type == m.Spec.Type && s.Type == flowcontrolv1.PriorityLevelEnablementLimited &&
		s.Limited != nil && !equality.Semantic.DeepEqual(s.Limited.LimitResponse, m.Spec.Limited.LimitResponse) {
		errs = append(errs, field.Invalid(spec.Child("limited", "limitResponse"), "", fmt.Sprintf("limitResponse of '%s' must equal the fixed value", pl.Name)))
	}
	return errs
}

func validateShares(ncs, lendable, borrowing *int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ncs != nil && *ncs < 0 {
		errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *ncs, "must be a non-negative integer"))
	}
	if lendable != nil && (*lendable < 0 || *lendable > 100) {
		errs = append(errs, field.Invalid(p.Child("lendablePercent"), *lendable, "must be between 0 and 100, inclusive"))
	}
	if borrowing != nil && *borrowing < 0 {
		errs = append(errs, field.Invalid(p.Child("borrowingLimitPercent"), *borrowing, "if specified, must be a non-negative integer"))
	}
	return errs
}

func validateLimitResponse(lr flowcontrolv1.LimitResponse, p *field.Path) field.ErrorList {
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			return field.ErrorList{field.Forbidden(p.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited")}
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing == nil {
			return field.ErrorList{field.Required(p.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited")}
		}
		return validateQueuing(*lr.Queuing, p.Child("queuing"))
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), lr.Type, supportedResponses)}
	}
	return nil
}

func validateQueuing(q flowcontrolv1.QueuingConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(p.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	switch {
	case q.Queues <= 0:
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, "must be positive"))
	case q.Queues > maxQueues:
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	case shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)) > shufflesharding.MaxHashBits:
		errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize, fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d",
			q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
	}
	return errs
}

func validateName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "name or generateName is required")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}
