package schemas

import (
	"encoding/json"
	"fmt"

	"github.com/invopop/jsonschema"
)

// JSONSchema returns the JSON Schema document of m's payload, as checked in
// under schemas/jsonschema/<name>.v<version>.json.
func JSONSchema(m Message) ([]byte, error) {
	name, version := m.Schema()
	r := jsonschema.Reflector{
		DoNotReference:             true,
		RequiredFromJSONSchemaTags: false,
	}
	s := r.Reflect(m)
	s.ID = jsonschema.ID(fmt.Sprintf("https://pace.dev/schemas/%s.v%d.json", name, version))
	s.Title = name
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal schema %s: %w", name, err)
	}
	return append(b, '\n'), nil
}

// FileName is the file holding m's JSON Schema.
func FileName(m Message) string {
	name, version := m.Schema()
	return fmt.Sprintf("%s.v%d.json", name, version)
}
