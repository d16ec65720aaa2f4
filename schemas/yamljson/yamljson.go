// Package yamljson converts a YAML document to JSON as the Go type it will
// be decoded into reads it, so that a value means what its author typed.
//
// A converter that does not know the target (sigs.k8s.io/yaml.YAMLToJSON)
// has to guess each scalar's type, and guesses by YAML 1.1: in a list of
// items, yes becomes true and 010 becomes 8, which a list of strings then
// refuses or keeps wrongly. Here the YAML nodes (go.yaml.in/yaml/v3) are
// walked alongside the target type by reflection (struct fields by their
// json names, embedded structs promoted as encoding/json does, maps,
// slices, pointers):
//
//   - Where the target is a Go string (a string field, a []string element,
//     a map[string]string value), a scalar becomes the JSON string of
//     exactly the text written: yes, 010, 1.0 and null stay as written, and
//     a quoted scalar is its content. A mapping or a sequence there is an
//     error naming its path and how to quote it.
//   - Elsewhere (numbers, booleans, any, json.RawMessage, unknown fields,
//     and types with their own UnmarshalJSON or UnmarshalText that are not
//     strings) a plain scalar is resolved by the YAML 1.2 core schema: null,
//     Null, NULL, ~ and the empty scalar are null; true and false (also
//     capitalised) are booleans; 10, 010 (ten), 0o10 (eight), 0x1F and
//     1.5e3 are numbers; anything else is a string. .inf and .nan, which
//     JSON cannot write, stay strings. An explicit !!str tag makes a string.
//
// Aliases are followed (within a budget proportional to the document's
// size, so that nested aliases cannot expand it without bound), the merge
// key << merges a mapping or a list of mappings (explicit keys win, then
// earlier mappings), and a key given twice in one mapping is an error.
// Type mismatches other than a collection where a string belongs (a list
// where a number belongs, an unknown field) pass through, for the strict
// JSON decoding that follows to report.
//
// The package knows nothing of Pace's documents: the manager picks the
// target type of a submission (Pace's spec or an Asperathos document), and
// pace submit converts with the same choice.
package yamljson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Document is one parsed YAML document.
type Document struct {
	root   *yaml.Node // nil for an empty document
	budget int        // nodes a conversion may visit, aliases expanded
}

// ErrMultipleDocuments is returned by Parse for a stream of several documents.
var ErrMultipleDocuments = errors.New("more than one document")

// Parse parses data, one YAML document (JSON is YAML too). An empty
// document (nothing, or only comments) converts to null. It returns a
// syntax error of the YAML parser, or ErrMultipleDocuments.
func Parse(data []byte) (Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil && !errors.Is(err, io.EOF) {
		return Document{}, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		if err != nil {
			return Document{}, err
		}
		if !empty(&more) {
			return Document{}, ErrMultipleDocuments
		}
	}
	d := Document{budget: 1000 + 10*len(data)}
	if !empty(&n) {
		d.root = &n
	}
	return d, nil
}

// empty reports whether a parsed document holds nothing (a "---" alone).
func empty(n *yaml.Node) bool {
	c := deref(n)
	return c == nil || c.Kind == 0 || c.Kind == yaml.ScalarNode && c.Value == "" && c.Style == 0
}

// Has reports whether the document is a mapping with key at its top.
func (d Document) Has(key string) bool {
	n := deref(d.root)
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := deref(n.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == key {
			return true
		}
	}
	return false
}

// JSON returns the document as JSON for decoding into a value of type t,
// and every value it cannot convert, with paths under root (a nil root
// names the document's fields from the top, and the whole document
// "body"). The JSON is returned with errors too, null in their place, so
// that the caller may check the rest of the document.
func (d Document) JSON(t reflect.Type, root *field.Path) ([]byte, field.ErrorList) {
	c := &converter{budget: d.budget}
	c.value(d.root, t, root)
	return c.buf.Bytes(), c.errs
}

// converter writes one document's JSON.
type converter struct {
	buf    bytes.Buffer
	errs   field.ErrorList
	budget int // nodes left to visit
}

// value writes n, read as type t (nil: unknown), found at p.
func (c *converter) value(n *yaml.Node, t reflect.Type, p *field.Path) {
	n = deref(n)
	if n == nil {
		c.buf.WriteString("null")
		return
	}
	if !c.spend(p) {
		c.buf.WriteString("null")
		return
	}
	t = shape(t)
	switch {
	case t != nil && t.Kind() == reflect.String:
		c.text(n, p)
	case n.Kind == yaml.MappingNode:
		c.mapping(n, t, p)
	case n.Kind == yaml.SequenceNode:
		c.sequence(n, t, p)
	default:
		c.buf.WriteString(coreScalar(n))
	}
}

// spend counts one node visited at p, and reports false (and an error,
// once) when the budget is spent.
func (c *converter) spend(p *field.Path) bool {
	if c.budget--; c.budget == 0 {
		c.errs = append(c.errs, field.Invalid(docPath(p), "", "the document's aliases expand it too much"))
	}
	return c.budget > 0
}

// text writes a scalar as the string written; a collection is an error.
func (c *converter) text(n *yaml.Node, p *field.Path) {
	if n.Kind == yaml.ScalarNode {
		c.str(n.Value)
		return
	}
	example := flowText(n)
	c.errs = append(c.errs, field.TypeInvalid(docPath(p), example,
		"must be a string: put it in quotes, e.g. "+strconv.Quote(example)))
	c.buf.WriteString("null")
}

func (c *converter) str(s string) {
	b, _ := json.Marshal(s) // a string always encodes
	c.buf.Write(b)
}

// mapping writes a mapping as an object whose values are read as t's
// fields (a struct) or elements (a map).
func (c *converter) mapping(n *yaml.Node, t reflect.Type, p *field.Path) {
	var fields map[string]reflect.StructField
	if t != nil && t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	c.buf.WriteByte('{')
	for i, kv := range c.pairs(n, p, 0) {
		if i > 0 {
			c.buf.WriteByte(',')
		}
		c.str(kv.key)
		c.buf.WriteByte(':')
		switch {
		case fields != nil:
			c.value(kv.val, fields[kv.key].Type, p.Child(kv.key)) // unknown: a nil type
		case t != nil && t.Kind() == reflect.Map:
			c.value(kv.val, t.Elem(), p.Key(kv.key))
		default:
			c.value(kv.val, nil, p.Child(kv.key))
		}
	}
	c.buf.WriteByte('}')
}

// sequence writes a sequence as a list of t's elements.
func (c *converter) sequence(n *yaml.Node, t reflect.Type, p *field.Path) {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	c.buf.WriteByte('[')
	for i, e := range n.Content {
		if i > 0 {
			c.buf.WriteByte(',')
		}
		c.value(e, elem, p.Index(i))
	}
	c.buf.WriteByte(']')
}

// pair is one key and value of a mapping.
type pair struct {
	key string
	val *yaml.Node
}

// pairs lists a mapping's keys and values, in order, with those of its
// merged mappings (<<) that it does not set itself. depth bounds merges
// of merges.
func (c *converter) pairs(n *yaml.Node, p *field.Path, depth int) []pair {
	var own, merged []pair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if !c.spend(p) {
			return own
		}
		switch {
		case k == nil || k.Kind != yaml.ScalarNode:
			c.errs = append(c.errs, field.Invalid(docPath(p), flowText(k), "a key must be a scalar, not a mapping or a list"))
		case k.Tag == "!!merge" && k.Style&yaml.TaggedStyle == 0:
			merged = append(merged, c.merge(v, p, depth)...)
		case seen[k.Value]:
			c.errs = append(c.errs, field.Duplicate(p.Child(k.Value), k.Value))
		default:
			seen[k.Value] = true
			own = append(own, pair{k.Value, v})
		}
	}
	for _, kv := range merged {
		if !seen[kv.key] {
			seen[kv.key] = true
			own = append(own, kv)
		}
	}
	return own
}

// merge returns the pairs the value of a merge key (<<) brings: those of
// a mapping, or of a list of mappings, the earlier ones first.
func (c *converter) merge(v *yaml.Node, p *field.Path, depth int) []pair {
	const maxDepth = 32
	v = deref(v)
	refuse := func() []pair {
		c.errs = append(c.errs, field.Invalid(p.Child("<<"), flowText(v), "a merge key (<<) takes a mapping or a list of mappings"))
		return nil
	}
	if depth >= maxDepth {
		c.errs = append(c.errs, field.Invalid(p.Child("<<"), "", fmt.Sprintf("merges nested more than %d deep", maxDepth)))
		return nil
	}
	switch {
	case v != nil && v.Kind == yaml.MappingNode:
		return c.pairs(v, p, depth+1)
	case v != nil && v.Kind == yaml.SequenceNode:
		var out []pair
		for _, m := range v.Content {
			if m = deref(m); m == nil || m.Kind != yaml.MappingNode {
				return refuse()
			}
			out = append(out, c.pairs(m, p, depth+1)...)
		}
		return out
	}
	return refuse()
}

// deref follows aliases and enters documents; nil for an empty one.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil {
		switch n.Kind {
		case yaml.AliasNode:
			n = n.Alias
		case yaml.DocumentNode:
			if len(n.Content) == 0 {
				return nil
			}
			n = n.Content[0]
		default:
			return n
		}
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawMessage      = reflect.TypeFor[json.RawMessage]()
)

// shape is the type whose shape guides the conversion: t without
// pointers, or nil when t says nothing of its JSON form (an interface, raw
// JSON, or a non-string type that decodes itself).
func shape(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil || t.Kind() == reflect.Interface || t == rawMessage:
		return nil
	case t.Kind() == reflect.String:
		return t
	case reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler):
		return nil
	}
	return t
}

// jsonFields maps the JSON names of t's fields to them, with the fields
// of untagged embedded structs promoted, as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if ft := f.Type; f.Anonymous && tag == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				promoted := jsonFields(ft)
				maps.DeleteFunc(promoted, func(k string, _ reflect.StructField) bool { _, ok := out[k]; return ok })
				maps.Copy(out, promoted) // the outer struct's own fields win
				continue
			}
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// flowText renders a node on one line as YAML, for error messages.
func flowText(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	flow := *n
	flow.Style |= yaml.FlowStyle
	b, err := yaml.Marshal(&flow)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if n.Kind == yaml.MappingNode {
		s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	}
	const max = 64
	if len(s) > max {
		s = s[:max-3] + "..."
	}
	return s
}

// docPath names the whole document "body" when there is no root.
func docPath(p *field.Path) *field.Path {
	if p == nil {
		return field.NewPath("body")
	}
	return p
}
