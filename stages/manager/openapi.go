package manager

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// OpenAPI returns the OpenAPI 3 document of the API, generated from the
// same route table that the mux serves.
func (a *API) OpenAPI() map[string]any {
	errorRef := map[string]any{"$ref": "#/components/schemas/Error"}
	errResp := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": errorRef}}}
	}
	paths := map[string]any{}
	for _, rt := range a.routes {
		item, _ := paths[rt.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.path] = item
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true,
				"schema": map[string]any{"type": "string"}})
		}
		if strings.HasSuffix(rt.path, "/log") {
			params = append(params, map[string]any{"name": "follow", "in": "query",
				"schema": map[string]any{"type": "boolean"}, "description": "stream NDJSON until the job ends"})
		}
		ok := map[string]any{"description": http.StatusText(rt.ok)}
		if rt.ok != http.StatusNoContent {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{}}}
		}
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": operationID(rt),
			"responses": map[string]any{
				strconv.Itoa(rt.ok): ok,
				"400":               errResp("invalid request; details lists every invalid field"),
				"401":               errResp("missing or rejected credentials"),
				"403":               errResp("not allowed"),
				"404":               errResp("unknown job (or another user's)"),
				"409":               errResp("conflicts with the job's state"),
				"429":               errResp("throttled by API Priority and Fairness, or past a quota; see Retry-After"),
				"500":               errResp("internal error"),
			},
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.body {
			content := map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
			if rt.path == "/submissions" && rt.method == "POST" {
				content["application/yaml"] = map[string]any{"schema": map[string]any{"type": "object"}}
				op["responses"].(map[string]any)["413"] = errResp("body too large, or more items than a job may have")
				op["responses"].(map[string]any)["503"] = errResp("the items could not be stored: nothing was kept; see Retry-After")
				op["responses"].(map[string]any)["507"] = errResp("the bus is full: nothing was kept; see Retry-After")
				op["responses"].(map[string]any)["415"] = errResp("unsupported content type")
			}
			op["requestBody"] = map[string]any{"required": rt.path == "/submissions" && rt.method == "POST", "content": content}
		}
		item[strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "Pace manager API", "version": "1",
			"description": "Asperathos-compatible job API of Pace. See docs/api.md."},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas": map[string]any{"Error": map[string]any{
				"type":     "object",
				"required": []string{"error_code", "error_message", "error_name"},
				"properties": map[string]any{
					"error_code":    map[string]any{"type": "integer"},
					"error_message": map[string]any{"type": "string"},
					"error_name":    map[string]any{"type": "string"},
					"details": map[string]any{"type": "array", "items": map[string]any{"type": "object",
						"properties": map[string]any{"field": map[string]any{"type": "string"}, "type": map[string]any{"type": "string"},
							"detail": map[string]any{"type": "string"}, "value": map[string]any{"type": "string"}}}},
				},
			}},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
	}
}

func operationID(rt route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(rt.method))
	for _, part := range strings.Split(strings.Trim(rt.path, "/"), "/") {
		part = strings.Trim(part, "{}")
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// Routes lists "METHOD /path" of every route, for documentation checks.
func (a *API) Routes() []string {
	out := make([]string, 0, len(a.routes)+1)
	for _, rt := range a.routes {
		out = append(out, rt.method+" "+rt.path)
	}
	return append(out, "GET /openapi.json")
}
