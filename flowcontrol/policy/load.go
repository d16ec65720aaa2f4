package policy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// The API versions accepted by Load. v1beta3 is converted to v1.
const (
	GroupVersion        = "flowcontrol.apiserver.k8s.io/v1"
	GroupVersionV1beta3 = "flowcontrol.apiserver.k8s.io/v1beta3"

	// preserveZeroShares is v1beta3's annotation that keeps a zero
	// nominalConcurrencyShares from being defaulted to 30.
	preserveZeroShares = "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares"
)

// Objects is a set of APF configuration objects, in the order read.
type Objects struct {
	FlowSchemas    []*flowcontrolv1.FlowSchema
	PriorityLevels []*flowcontrolv1.PriorityLevelConfiguration
}

// LoadFile reads the objects of a YAML or JSON file; see Load.
func LoadFile(path string) (Objects, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Objects{}, fmt.Errorf("flowcontrol config: %w", err)
	}
	objs, err := Load(bytes.NewReader(b))
	if err != nil {
		return Objects{}, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Load reads FlowSchemas and PriorityLevelConfigurations from multi-document
// YAML or JSON (documents separated by "---" lines; a kind List with items is
// unpacked), decodes them strictly (unknown fields are errors), converts
// v1beta3 to v1, applies the API defaults and validates them. It returns every
// problem as a field.ErrorList error naming the document, and no objects when
// there is any problem: nothing is half-applied.
func Load(r io.Reader) (Objects, error) {
	docs, err := splitDocuments(r)
	if err != nil {
		return Objects{}, err
	}
	var objs Objects
	var errs field.ErrorList
	for i, doc := range docs {
		errs = append(errs, objs.decode(doc, field.NewPath(fmt.Sprintf("document[%d]", i)))...)
	}
	if len(errs) == 0 {
		SetDefaults(&objs)
		errs = objs.Validate()
	}
	if len(errs) > 0 {
		return Objects{}, errs.ToAggregate()
	}
	return objs, nil
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

func (o *Objects) decode(doc []byte, path *field.Path) field.ErrorList {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return field.ErrorList{field.Invalid(path, "", err.Error())}
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return nil // empty document
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return field.ErrorList{field.Invalid(path, "", err.Error())}
	}
	if tm.Kind == "List" || strings.HasSuffix(tm.Kind, "List") {
		var errs field.ErrorList
		for i, item := range tm.Items {
			errs = append(errs, o.decode(item, path.Child("items").Index(i))...)
		}
		return errs
	}
	if tm.APIVersion != GroupVersion && tm.APIVersion != GroupVersionV1beta3 {
		return field.ErrorList{field.NotSupported(path.Child("apiVersion"), tm.APIVersion, []string{GroupVersion, GroupVersionV1beta3})}
	}
	switch tm.Kind {
	case "FlowSchema":
		fs := new(flowcontrolv1.FlowSchema)
		if err := yaml.UnmarshalStrict(js, fs); err != nil {
			return field.ErrorList{field.Invalid(path, "FlowSchema", err.Error())}
		}
		fs.APIVersion = GroupVersion
		o.FlowSchemas = append(o.FlowSchemas, fs)
	case "PriorityLevelConfiguration":
		pl := new(flowcontrolv1.PriorityLevelConfiguration)
		if err := yaml.UnmarshalStrict(js, pl); err != nil {
			return field.ErrorList{field.Invalid(path, "PriorityLevelConfiguration", err.Error())}
		}
		if tm.APIVersion == GroupVersionV1beta3 {
			convertV1beta3(pl)
		}
		pl.APIVersion = GroupVersion
		o.PriorityLevels = append(o.PriorityLevels, pl)
	default:
		return field.ErrorList{field.NotSupported(path.Child("kind"), tm.Kind, []string{"FlowSchema", "PriorityLevelConfiguration", "List"})}
	}
	return nil
}

// convertV1beta3 applies the one semantic difference between v1beta3 and v1:
// in v1beta3 a zero nominalConcurrencyShares means "default" (30) unless the
// preserve-zero annotation is set.
func convertV1beta3(pl *flowcontrolv1.PriorityLevelConfiguration) {
	l := pl.Spec.Limited
	if l == nil {
		return
	}
	zero := l.NominalConcurrencyShares == nil || *l.NominalConcurrencyShares == 0
	if _, keep := pl.Annotations[preserveZeroShares]; zero && !keep {
		l.NominalConcurrencyShares = nil
	}
	delete(pl.Annotations, preserveZeroShares)
	if len(pl.Annotations) == 0 {
		pl.Annotations = nil
	}
}

// splitDocuments splits a YAML stream at "---" separator lines.
func splitDocuments(r io.Reader) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "---") && strings.TrimSpace(strings.SplitN(line[3:], "#", 2)[0]) == "" {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return append(docs, cur.Bytes()), nil
}

// Marshal renders objects as multi-document YAML, priority levels first.
func (o Objects) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	emit := func(v any) error {
		js, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			return err
		}
		if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
			delete(m, "status") // objects read from files have none
		}
		b, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(b)
		return nil
	}
	for _, pl := range o.PriorityLevels {
		pl.APIVersion, pl.Kind = GroupVersion, "PriorityLevelConfiguration"
		if err := emit(pl); err != nil {
			return nil, err
		}
	}
	for _, fs := range o.FlowSchemas {
		fs.APIVersion, fs.Kind = GroupVersion, "FlowSchema"
		if err := emit(fs); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}
