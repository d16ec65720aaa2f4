package manager

import (
	"encoding/json"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/schemas/yamljson"
)

// YAMLToJSON converts a YAML job document to the JSON Submit reads, as
// Submit converts a document sent as application/yaml: strings as written,
// other values by the YAML 1.2 core schema (see package yamljson), read as
// an Asperathos submission when a plugin or plugin_info key is at its top,
// else as Pace's spec. It returns a *schemas.APIError (400) naming every
// value it cannot convert (a mapping or list where a string belongs) or
// the YAML syntax error, so that pace submit reports them as the API would.
func YAMLToJSON(doc []byte) ([]byte, error) {
	out, errs := yamlJSON(doc)
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	return out, nil
}

// yamlJSON converts a YAML job document for its format's type, with null
// in place of the values it reports. Field paths are those of the strict
// decoding: spec.… for Pace's spec, from the top for Asperathos'.
func yamlJSON(doc []byte) ([]byte, field.ErrorList) {
	d, err := yamljson.Parse(doc)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("body"), "", "invalid YAML: "+err.Error())}
	}
	if d.Has("plugin") || d.Has("plugin_info") {
		return d.JSON(reflect.TypeFor[asperathosDoc](), nil)
	}
	return d.JSON(reflect.TypeFor[schemas.JobSpec](), field.NewPath("spec"))
}

// Media types of request bodies.
const (
	mediaJSON = "application/json"
	mediaYAML = "application/yaml"
	// mediaForm is what curl -d sends unless told otherwise.
	mediaForm = "application/x-www-form-urlencoded"
)

// mediaType returns the format of a body sent as contentType: mediaJSON,
// or mediaYAML when yamlOK. No content type is JSON, like Asperathos; so
// is a form body that parses as JSON (curl -d without -H, which Asperathos'
// users and clients rely on). Anything else is a 415 *schemas.APIError
// saying what to send.
func mediaType(contentType string, body []byte, yamlOK bool) (string, error) {
	if contentType == "" {
		return mediaJSON, nil
	}
	want := mediaJSON
	if yamlOK {
		want += " or " + mediaYAML
	}
	mt, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return "", apiError(http.StatusUnsupportedMediaType, "content type %q: %v: send %s", contentType, err, want)
	case mt == mediaJSON:
		return mediaJSON, nil
	case yamlOK && (mt == mediaYAML || mt == "application/x-yaml" || mt == "text/yaml" || mt == "text/x-yaml"):
		return mediaYAML, nil
	case mt == mediaForm:
		if strings.TrimSpace(string(body)) == "" || json.Valid(body) {
			return mediaJSON, nil
		}
		return "", apiError(http.StatusUnsupportedMediaType,
			"content type %q: the body is not JSON: send it with Content-Type: %s (curl -H 'Content-Type: application/json')", mt, want)
	}
	return "", apiError(http.StatusUnsupportedMediaType, "content type %q: send %s", mt, want)
}
