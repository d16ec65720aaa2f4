package apf

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// WorkRequest describes a for the work estimator, with the list options of
// query (lists and watches; nil for none).
func WorkRequest(a policy.Attributes, query url.Values) *work.Request {
	r := &work.Request{Verb: a.Verb, APIGroup: a.APIGroup, Resource: a.Resource, Subresource: a.Subresource,
		Namespace: a.Namespace, Name: a.Name}
	if !a.IsResourceRequest || (r.Verb != "list" && r.Verb != "watch") {
		return r
	}
	r.InvalidListOptions = !parsesAsInt(query, "limit") || !parsesAsInt(query, "timeoutSeconds")
	r.ResourceVersion = query.Get("resourceVersion")
	r.ResourceVersionMatch = query.Get("resourceVersionMatch")
	r.Continue = query.Get("continue")
	r.LabelSelector = query.Get("labelSelector")
	r.FieldSelector = query.Get("fieldSelector")
	if v := query["limit"]; len(v) > 0 {
		r.Limit, _ = strconv.ParseInt(v[0], 10, 64)
	}
	if v := query["sendInitialEvents"]; len(v) > 0 {
		send := v[0] != "0" && !strings.EqualFold(v[0], "false") // kube's reading of a bool parameter
		r.SendInitialEvents = &send
	}
	return r
}

// parsesAsInt reports whether the parameter is absent or its first value is an int64.
func parsesAsInt(query url.Values, key string) bool {
	v := query[key]
	if len(v) == 0 {
		return true
	}
	_, err := strconv.ParseInt(v[0], 10, 64)
	return err == nil
}

// isMutating reports whether the estimator charges r for the watches it notifies.
func isMutating(r *work.Request) bool {
	switch r.Verb {
	case "create", "update", "patch", "delete":
		return r.Resource != "serviceaccounts" || r.Subresource != "token"
	}
	return false
}
