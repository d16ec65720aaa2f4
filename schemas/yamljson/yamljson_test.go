package yamljson_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/schemas/yamljson"
)

// base is embedded in target, as JobSpec-like documents embed settings.
type base struct {
	Name string `json:"name"`
}

type target struct {
	base
	Items    []string          `json:"items"`
	Env      map[string]string `json:"env"`
	Count    int               `json:"count"`
	Ratio    float64           `json:"ratio"`
	On       *bool             `json:"on"`
	Any      any               `json:"any"`
	Raw      json.RawMessage   `json:"raw"`
	Timeout  schemas.Duration  `json:"timeout"`
	Nested   *target           `json:"nested"`
	Counts   map[string]int    `json:"counts"`
	Untagged string
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"strings as written", `items: [x, yes, no, on, off, y, n, 010, 1.0, null, "~", 0x1F, ~, 'a b', "c\td"]`,
			`{"items":["x","yes","no","on","off","y","n","010","1.0","null","~","0x1F","~","a b","c\td"]}`},
		{"map values as written", "env: {A: yes, B: 010, C: 1e3, D: ''}", `{"env":{"A":"yes","B":"010","C":"1e3","D":""}}`},
		{"embedded and untagged fields", "name: no\nUntagged: off", `{"name":"no","Untagged":"off"}`},
		{"pointer to struct", "nested: {items: [on]}", `{"nested":{"items":["on"]}}`},
		{"decimal with leading zero", "count: 010", `{"count":10}`},
		{"octal and hex", "counts: {a: 0o10, b: 0x1F, c: -017, d: +5}", `{"counts":{"a":8,"b":31,"c":-17,"d":5}}`},
		{"floats in JSON grammar", "any: [.5, -1., 1.50e3, 010.5, .inf, .nan]", `{"any":[0.5,-1,1.50e3,10.5,".inf",".nan"]}`},
		{"core booleans only", "on: true\nany: [yes, True, FALSE, off]", `{"on":true,"any":["yes",true,false,"off"]}`},
		{"core nulls", "any: {a: null, b: Null, c: ~, d: , e: 'null'}", `{"any":{"a":null,"b":null,"c":null,"d":null,"e":"null"}}`},
		{"explicit str tag", "any: !!str 010", `{"any":"010"}`},
		{"self-decoding type resolved", "timeout: 90", `{"timeout":90}`},
		{"self-decoding string", "timeout: 1m", `{"timeout":"1m"}`},
		{"raw JSON resolved", "raw: {a: 010, b: yes}", `{"raw":{"a":10,"b":"yes"}}`},
		{"unknown field resolved", "colour: 010", `{"colour":10}`},
		{"mistype passes through", "count: [1]", `{"count":[1]}`},
		{"alias followed", "name: &n yes\nitems: [*n]", `{"name":"yes","items":["yes"]}`},
		{"merge key", "base: &b {count: 1, name: a}\nnested: {<<: *b, name: b}",
			`{"base":{"count":1,"name":"a"},"nested":{"name":"b","count":1}}`},
		{"merge list, earlier wins", "x: &x {count: 1}\ny: &y {count: 2, name: y}\nnested: {<<: [*x, *y]}",
			`{"x":{"count":1},"y":{"count":2,"name":"y"},"nested":{"count":1,"name":"y"}}`},
		{"JSON input", `{"items": ["a", "yes"], "count": 3}`, `{"items":["a","yes"],"count":3}`},
		{"block scalar", "name: |\n  a\n  b\n", `{"name":"a\nb\n"}`},
		{"empty document", "# nothing\n", `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := yamljson.Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, errs := doc.JSON(reflect.TypeFor[target](), field.NewPath("spec"))
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if string(got) != tt.want {
				t.Errorf("JSON = %s\nwant   %s", got, tt.want)
			}
		})
	}
}

func TestJSONErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		root       *field.Path
		want       []string // every error, in order
		wantJSON   string
	}{
		{"mapping item", "items: [x, a: b]", field.NewPath("spec"),
			[]string{`spec.items[1]: Invalid value: "a: b": must be a string: put it in quotes, e.g. "a: b"`},
			`{"items":["x",null]}`},
		{"block mapping item", "items:\n  - x\n  - key: value\n", nil,
			[]string{`items[1]: Invalid value: "key: value": must be a string: put it in quotes, e.g. "key: value"`},
			`{"items":["x",null]}`},
		{"list in a map of strings", "env: {A: [1, 2]}", field.NewPath("spec"),
			[]string{`spec.env[A]: Invalid value: "[1, 2]": must be a string: put it in quotes, e.g. "[1, 2]"`},
			`{"env":{"A":null}}`},
		{"duplicate key", "count: 1\ncount: 2", field.NewPath("spec"),
			[]string{`spec.count: Duplicate value: "count"`}, `{"count":1}`},
		{"merge of a scalar", "nested: {<<: 1}", field.NewPath("spec"),
			[]string{`spec.nested.<<: Invalid value: "1": a merge key (<<) takes a mapping or a list of mappings`}, `{"nested":{}}`},
		{"whole document a list", "[a: b]", nil, nil, `[{"a":"b"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := yamljson.Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, errs := doc.JSON(reflect.TypeFor[target](), tt.root)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if diff := cmp.Diff(tt.want, msgs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if string(got) != tt.wantJSON {
				t.Errorf("JSON = %s, want %s", got, tt.wantJSON)
			}
		})
	}
}

func TestAliasBombIsRefused(t *testing.T) {
	doc := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 'b'; i <= 'j'; i++ {
		prev := string(i - 1)
		doc += string(i) + ": &" + string(i) + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
	}
	d, err := yamljson.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	out, errs := d.JSON(reflect.TypeFor[map[string][]any](), nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "aliases expand it too much") || len(out) > 100*len(doc) {
		t.Errorf("errors %v and %d bytes of JSON, want one expansion error and a bounded output", errs, len(out))
	}
}

func TestParse(t *testing.T) {
	if _, err := yamljson.Parse([]byte("a: 1\n---\nb: 2\n")); !errors.Is(err, yamljson.ErrMultipleDocuments) {
		t.Errorf("two documents: %v, want ErrMultipleDocuments", err)
	}
	if _, err := yamljson.Parse([]byte("a: 1\n---\n")); err != nil {
		t.Errorf("a trailing empty document: %v", err)
	}
	if _, err := yamljson.Parse([]byte("a: [1\n")); err == nil {
		t.Error("unclosed list parsed")
	}
	d, err := yamljson.Parse([]byte("plugin: x\nb: 1"))
	if err != nil || !d.Has("plugin") || d.Has("b ") || d.Has("c") {
		t.Errorf("Has: %v", err)
	}
}
