package policy

import (
	"bytes"
	_ "embed" // the kube bootstrap objects
	"fmt"
	"slices"
	"sync"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AutoUpdateAnnotation marks an object whose spec Pace keeps equal to its
// built-in default ("true") or leaves to its users ("false").
const AutoUpdateAnnotation = flowcontrolv1.AutoUpdateAnnotationKey

// ComponentsGroup is the group of Pace's own components when they call one
// another; the pace-internal FlowSchema exempts it, so internal calls never
// queue behind user traffic.
const ComponentsGroup = "pace:components"

// kubeDefaults are the bootstrap objects exactly as a kube-apiserver v1.37.2
// serves them (mandatory and suggested).
//
//go:embed kube-defaults.yaml
var kubeDefaults []byte

// paceDefaults are Pace's own suggested objects for its HTTP API.
//
//go:embed pace-defaults.yaml
var paceDefaults []byte

var (
	mandatoryFS = []string{flowcontrolv1.FlowSchemaNameExempt, flowcontrolv1.FlowSchemaNameCatchAll}
	mandatoryPL = []string{flowcontrolv1.PriorityLevelConfigurationNameExempt, flowcontrolv1.PriorityLevelConfigurationNameCatchAll}
)

func mustLoad(b []byte) Objects {
	objs, err := Load(bytes.NewReader(b))
	if err != nil {
		panic(fmt.Sprintf("built-in flowcontrol objects: %v", err)) // a wiring bug, caught by tests
	}
	return objs
}

// The built-in objects, parsed once: the configuration is maintained every
// minute, and parsing the YAML each time was most of an idle Pace's
// flowcontrol work.
var (
	parsedKube = sync.OnceValue(func() Objects { return mustLoad(kubeDefaults) })
	parsedPace = sync.OnceValue(func() Objects { return mustLoad(paceDefaults) })
)

// pick returns fresh copies of the objects of o that are mandatory, or of
// those that are not.
func (o Objects) pick(mandatory bool) Objects {
	var c Objects
	for _, fs := range o.FlowSchemas {
		if slices.Contains(mandatoryFS, fs.Name) == mandatory {
			c.FlowSchemas = append(c.FlowSchemas, fs.DeepCopy())
		}
	}
	for _, pl := range o.PriorityLevels {
		if slices.Contains(mandatoryPL, pl.Name) == mandatory {
			c.PriorityLevels = append(c.PriorityLevels, pl.DeepCopy())
		}
	}
	return c
}

// Mandatory returns fresh copies of the mandatory objects: the exempt and
// catch-all FlowSchemas and priority levels.
func Mandatory() Objects { return parsedKube().pick(true) }

// Suggested returns fresh copies of the suggested objects: kube-apiserver's
// (probes, system-*, kube-*, service-accounts, global-default, with their
// levels) followed by Pace's own (pace-internal, pace-probes,
// pace-anonymous, pace-submissions, pace-reads).
func Suggested() Objects {
	o := parsedKube().pick(false)
	pace := parsedPace().pick(false) // none of Pace's own is mandatory
	o.FlowSchemas = append(o.FlowSchemas, pace.FlowSchemas...)
	o.PriorityLevels = append(o.PriorityLevels, pace.PriorityLevels...)
	return o
}

// Defaults returns the mandatory and suggested objects together, sorted by
// name within each kind.
func Defaults() Objects {
	m, s := Mandatory(), Suggested()
	o := Objects{FlowSchemas: append(m.FlowSchemas, s.FlowSchemas...), PriorityLevels: append(m.PriorityLevels, s.PriorityLevels...)}
	o.sort()
	return o
}

func (o *Objects) sort() {
	slices.SortFunc(o.FlowSchemas, func(a, b *flowcontrolv1.FlowSchema) int { return cmpString(a.Name, b.Name) })
	slices.SortFunc(o.PriorityLevels, func(a, b *flowcontrolv1.PriorityLevelConfiguration) int { return cmpString(a.Name, b.Name) })
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Overlay returns base with every object of top replacing the one of the same
// kind and name, or added; this is how a --flowcontrol-config file is applied
// over the defaults.
func Overlay(base, top Objects) Objects {
	out := Objects{FlowSchemas: slices.Clone(base.FlowSchemas), PriorityLevels: slices.Clone(base.PriorityLevels)}
	for _, fs := range top.FlowSchemas {
		if i := slices.IndexFunc(out.FlowSchemas, func(x *flowcontrolv1.FlowSchema) bool { return x.Name == fs.Name }); i >= 0 {
			out.FlowSchemas[i] = fs
		} else {
			out.FlowSchemas = append(out.FlowSchemas, fs)
		}
	}
	for _, pl := range top.PriorityLevels {
		if i := slices.IndexFunc(out.PriorityLevels, func(x *flowcontrolv1.PriorityLevelConfiguration) bool { return x.Name == pl.Name }); i >= 0 {
			out.PriorityLevels[i] = pl
		} else {
			out.PriorityLevels = append(out.PriorityLevels, pl)
		}
	}
	return out
}

func mandatoryFlowSchema(name string) *flowcontrolv1.FlowSchema {
	if !slices.Contains(mandatoryFS, name) {
		return nil
	}
	for _, fs := range mandatoryObjects.FlowSchemas {
		if fs.Name == name {
			return fs
		}
	}
	return nil
}

func mandatoryPriorityLevel(name string) *flowcontrolv1.PriorityLevelConfiguration {
	if !slices.Contains(mandatoryPL, name) {
		return nil
	}
	for _, pl := range mandatoryObjects.PriorityLevels {
		if pl.Name == name {
			return pl
		}
	}
	return nil
}

// mandatoryObjects is parsed without validation (validation consults it).
var mandatoryObjects = func() Objects {
	docs, _ := splitDocuments(bytes.NewReader(kubeDefaults))
	var all Objects
	for _, d := range docs {
		_ = all.decode(d, nil)
	}
	SetDefaults(&all)
	return all.pick(true)
}()

// IsAutoUpdate reports whether Pace maintains the object's spec: the
// annotation is "true", or it is absent and the generation is 1.
func IsAutoUpdate(meta metav1.ObjectMeta) bool {
	switch meta.Annotations[AutoUpdateAnnotation] {
	case "true":
		return true
	case "false":
		return false
	}
	return meta.Generation == 1
}
