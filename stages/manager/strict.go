package manager

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// decodeStrict decodes the JSON document data into dst, a pointer to a
// struct, and reports every unknown field and every mistyped value with
// its path at once (encoding/json stops at the first). With errors, dst
// holds what could be decoded, and partial says whether that is every
// other field (so the caller may check them too).
func decodeStrict(data []byte, dst any, root *field.Path) (errs field.ErrorList, partial bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return field.ErrorList{field.Invalid(docPath(root), "", "invalid JSON: "+err.Error())}, false
	}
	if dec.More() {
		return field.ErrorList{field.Invalid(docPath(root), "", "invalid JSON: more than one document")}, false
	}
	errs = check(v, reflect.TypeOf(dst).Elem(), root)
	if len(errs) > 0 {
		// Decode what fits, so that the caller can check the rest of the
		// document too and report every problem at once. check has
		// removed the values it reported (encoding/json would stop at a
		// failing UnmarshalJSON, such as a duration's).
		pruned, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(pruned, dst)
		}
		var typeErr *json.UnmarshalTypeError
		return errs, err == nil || errors.As(err, &typeErr)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return field.ErrorList{field.Invalid(docPath(root), "", err.Error())}, false
	}
	return nil, true
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// check reports where v, a decoded JSON value, does not fit type t, and
// removes each value it reports from v's objects (and nulls it in lists),
// so that the rest decodes.
func check(v any, t reflect.Type, p *field.Path) (errs field.ErrorList) {
	if v == nil {
		return nil // null leaves the zero value
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface {
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
			return field.ErrorList{field.Invalid(p, short(v), err.Error())}
		}
		return nil
	}
	typeErr := func(want string) field.ErrorList {
		return field.ErrorList{field.TypeInvalid(docPath(p), short(v), "must be "+want)}
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return typeErr("an object")
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			f, ok := fields[k]
			if !ok {
				fp := p.Child(k)
				if p == nil && k == "" {
					fp = docPath(p).Key(k) // "body[]": an empty name has no path of its own at the top
				}
				errs = append(errs, field.Forbidden(fp, "unknown field"+didYouMean(k, slices.Collect(maps.Keys(fields)))))
				delete(obj, k)
				continue
			}
			errs = append(errs, checkIn(obj, k, f.Type, p.Child(k))...)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return typeErr("an object")
		}
		for _, k := range sortedKeys(obj) {
			errs = append(errs, checkIn(obj, k, t.Elem(), p.Key(k))...)
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return typeErr("a list")
		}
		for i, e := range arr {
			more := check(e, t.Elem(), p.Index(i))
			if _, isObj := e.(map[string]any); len(more) > 0 && !isObj {
				arr[i] = nil
			}
			errs = append(errs, more...)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return typeErr("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return typeErr("true or false")
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := v.(json.Number)
		if !ok {
			return typeErr("an integer")
		}
		if _, err := n.Int64(); err != nil {
			return typeErr("an integer")
		}
	case reflect.Float64, reflect.Float32:
		if _, ok := v.(json.Number); !ok {
			return typeErr("a number")
		}
	}
	return errs
}

// checkIn checks obj[k] and removes it when it does not fit as a whole (an
// object keeps its fitting fields). Removed, not nulled: encoding/json
// hands null to an UnmarshalJSON method, which may refuse it.
func checkIn(obj map[string]any, k string, t reflect.Type, p *field.Path) field.ErrorList {
	errs := check(obj[k], t, p)
	if _, isObj := obj[k].(map[string]any); len(errs) > 0 && !isObj {
		delete(obj, k)
	}
	return errs
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" && f.Type.Kind() == reflect.Struct {
			maps.Copy(out, jsonFields(f.Type)) // promoted, as encoding/json does
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
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

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// short renders a bad value for an error message, truncated.
func short(v any) string {
	s := fmt.Sprint(v)
	if b, err := json.Marshal(v); err == nil {
		s = string(b)
	}
	if len(s) > 64 {
		s = s[:61] + "..."
	}
	return s
}

// docPath names the whole document in errors: root, or "body" when the
// document's fields are at the top level (root is nil).
func docPath(root *field.Path) *field.Path {
	if root == nil {
		return field.NewPath("body")
	}
	return root
}

// merge appends to errs those of more that concern fields errs does not
// already report (a mistyped field is not also "required").
func merge(errs, more field.ErrorList) field.ErrorList {
	out := errs
	for _, e := range more {
		dup := false
		for _, r := range errs {
			if e.Field == r.Field || strings.HasPrefix(e.Field, r.Field+".") || strings.HasPrefix(r.Field, e.Field+".") {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, e)
		}
	}
	return out
}

// didYouMean suggests the known name closest to name, when one is within
// a third of its length in edits (at least one): "; did you mean \"x\"?".
func didYouMean(name string, known []string) string {
	best, bestD := "", max(1, len(name)/3)+1
	slices.Sort(known) // ties go to the first in order
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
