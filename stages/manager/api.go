package manager

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// route is one operation of the HTTP API. The table drives both the mux
// and the OpenAPI document, so they cannot drift apart.
type route struct {
	method, path, summary string
	// ok is the success status; body says whether the request has one.
	ok   int
	body bool
	// stream routes write their own response and have no request timeout.
	stream bool
	handle func(r *http.Request, u auth.User) (any, error)
}

// API serves the manager's HTTP API. It expects the caller in the request
// context (auth.Middleware); without one the caller is anonymous.
type API struct {
	m      *Stage
	routes []route
	// compat is Asperathos' compatibility mode (see AsperathosPrefix);
	// asperathos is the API's twin in that mode.
	compat     bool
	asperathos *API
}

// NewAPI returns the HTTP API of m.
func NewAPI(m *Stage) *API {
	a := &API{m: m}
	a.routes = a.table()
	a.asperathos = &API{m: m, compat: true}
	a.asperathos.routes = append(a.asperathos.table(), a.asperathos.asperathosExtras()...)
	return a
}

// Register adds every route of the API to mux, and under AsperathosPrefix
// in Asperathos' compatibility mode. Like Asperathos, every route is also
// served with a ".json" suffix (e.g. /submissions.json).
func (a *API) Register(mux *http.ServeMux) {
	a.register(mux, "")
	a.asperathos.register(mux, AsperathosPrefix)
	mux.HandleFunc("OPTIONS "+AsperathosPrefix+"/", a.asperathos.preflight)
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.OpenAPI())
	})
}

func (a *API) register(mux *http.ServeMux, prefix string) {
	for _, rt := range a.routes {
		h := a.wrap(rt)
		mux.Handle(rt.method+" "+prefix+rt.path, h)
		if !strings.HasSuffix(rt.path, "}") { // /submissions/{id}.json arrives as id "….json"
			mux.Handle(rt.method+" "+prefix+rt.path+".json", h)
		}
	}
}

// Handler returns the API alone on a new mux, for tests and embedding.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	a.Register(mux)
	return mux
}

func (a *API) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := auth.FromContext(r.Context())
		if !ok {
			u = auth.AnonymousUser()
		}
		if rt.stream {
			r = r.WithContext(context.WithValue(r.Context(), responseKey{}, w))
		} else {
			ctx, cancel := context.WithTimeout(r.Context(), a.m.cfg.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		if a.compat {
			a.cors(w)
		}
		body, err := rt.handle(r, u)
		if a.compat && err != nil {
			if e := asAPIError(err); e.Code == http.StatusNotFound {
				err = apiError(http.StatusBadRequest, "%s", e.Message) // Asperathos' answer to an unknown job
			}
		}
		switch {
		case err != nil:
			a.writeError(w, r, err)
		case rt.stream && body == nil: // the handler wrote the response
		case rt.ok == http.StatusNoContent:
			w.WriteHeader(rt.ok)
		default:
			writeJSON(w, rt.ok, body)
		}
	})
}

func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = apiError(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", mbe.Limit)
	}
	e := asAPIError(err)
	var body any = e
	if ie := (installError{}); errors.As(err, &ie) {
		body = ie
	}
	if e.Code >= 500 && e.Code != http.StatusNotImplemented { // a route Pace does not implement is no failure
		a.m.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if e.Code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pace"`)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads a size-limited body in an accepted content type (JSON,
// or YAML when yamlOK) and returns it with its media type (see mediaType:
// no content type, and a form body that is JSON, are JSON).
func (a *API) readBody(r *http.Request, yamlOK bool) ([]byte, string, error) {
	ct := r.Header.Get("Content-Type")
	if _, err := mediaType(ct, nil, yamlOK); err != nil {
		return nil, "", err // refused before the body is read; a form's is checked below
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, a.m.cfg.MaxBodyBytes))
	if err != nil {
		return nil, "", err
	}
	mt, err := mediaType(ct, data, yamlOK)
	if err != nil {
		return nil, "", err
	}
	return data, mt, nil
}

// credentials are the Asperathos authentication fields of a request body.
type credentials struct {
	EnableAuth bool   `json:"enable_auth"`
	Username   string `json:"username"`
	Password   string `json:"password"`
}

// decode reads a JSON body into v, a pointer to a struct embedding
// credentials, and returns the caller: the body's user when enable_auth is
// set, else u. An empty body is no body. Unknown fields and mistyped
// values are refused, each with its path.
func (a *API) decode(r *http.Request, u auth.User, v any) (auth.User, error) {
	data, _, err := a.readBody(r, false)
	if err != nil {
		return u, err
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		if errs, _ := decodeStrict(data, v, nil); len(errs) > 0 {
			return u, invalidAs("request", errs)
		}
	}
	var c credentials
	_ = json.Unmarshal(data, &c)
	return a.m.credentialsUser(u, c)
}

// pathToken returns the path value name of r, refused with a field error
// naming it unless it is a token (1-128 letters, digits, '-' or '_').
func pathToken(r *http.Request, name string) (string, error) {
	v := r.PathValue(name)
	if !schemas.ValidToken(v) {
		return "", invalidAs("request", field.ErrorList{field.Invalid(field.NewPath(name), v, "must be 1-128 letters, digits, '-' or '_'")})
	}
	return v, nil
}

// clusterCall reads a call on /submissions/cluster/{name}/…: the caller
// (bodyUser) and the cluster's name.
func (a *API) clusterCall(r *http.Request, u auth.User) (auth.User, string, error) {
	u, err := a.bodyUser(r, u)
	if err != nil {
		return u, "", err
	}
	name, err := pathToken(r, "name")
	return u, name, err
}

// bodyUser reads an optional Asperathos {"enable_auth", "username",
// "password"} body and returns the caller.
func (a *API) bodyUser(r *http.Request, u auth.User) (auth.User, error) {
	var c credentials
	return a.decode(r, u, &c)
}

func (m *Stage) credentialsUser(u auth.User, c credentials) (auth.User, error) {
	if !c.EnableAuth {
		return u, nil
	}
	if c.Username == "" || c.Password == "" {
		return u, apiError(http.StatusBadRequest, "enable_auth needs username and password")
	}
	if m.users != nil {
		if got, ok := m.users.Lookup(c.Password); ok && got.Name == c.Username {
			return got, nil
		}
	}
	return u, apiError(http.StatusUnauthorized, "username or password rejected")
}

func (a *API) command(fn func(context.Context, auth.User, string) (*schemas.JobRecord, error)) func(*http.Request, auth.User) (any, error) {
	return func(r *http.Request, u auth.User) (any, error) {
		u, err := a.bodyUser(r, u)
		if err != nil {
			return nil, err
		}
		_, err = fn(r.Context(), u, jobID(r))
		return nil, err
	}
}

// job is Manager.Job for a read. In the compatibility mode, an unknown
// job of a caller without credentials, on an API that needs them, is a
// 401 (Asperathos' answer to failed authentication), not a 400: the
// credentials may be what is missing. Whether the job exists stays untold.
func (a *API) job(ctx context.Context, u auth.User, id string) (*schemas.JobRecord, error) {
	rec, err := a.m.Job(ctx, u, id)
	if err != nil && a.compat && u.IsAnonymous() && !a.m.cfg.Open && asAPIError(err).Code == http.StatusNotFound {
		return nil, apiError(http.StatusUnauthorized, "job %s not found for a caller without credentials: send a bearer token", id)
	}
	return rec, err
}

func (a *API) report(r *http.Request, u auth.User) (Detailed, *Summary, error) {
	rec, err := a.job(r.Context(), u, jobID(r))
	if err != nil {
		return nil, nil, err
	}
	return a.m.Report(r.Context(), rec)
}

func (a *API) clusters(r *http.Request, u auth.User, activeOnly bool) (any, error) {
	all, err := a.m.Clusters(r.Context(), u)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, c := range all {
		if activeOnly && !c.Active {
			continue
		}
		v := map[string]any{"active": c.Active, "conf_content": c.Config}
		for name, cert := range c.Certificates {
			v[name] = cert
		}
		out[c.Name] = v
	}
	if activeOnly && len(out) == 0 {
		return nil, apiError(http.StatusNotFound, "no cluster is active")
	}
	return out, nil
}

// logs writes a job's log lines as a JSON list, or with ?follow=true as
// NDJSON, flushed line by line, until the job is final and every line sent.
func (a *API) logs(r *http.Request, u auth.User) (any, error) {
	ctx := r.Context()
	follow := false
	if q := r.URL.Query().Get("follow"); q != "" {
		var err error
		if follow, err = strconv.ParseBool(q); err != nil {
			return nil, invalidAs("request", field.ErrorList{field.Invalid(field.NewPath("follow"), q, "must be true or false")})
		}
	}
	rec, err := a.job(ctx, u, jobID(r))
	if err != nil {
		return nil, err
	}
	if !follow {
		lines, err := collectLogs(a.m, ctx, rec.ID)
		if a.compat {
			return asperathosLog(lines), err
		}
		if lines == nil {
			lines = []*schemas.LogLine{}
		}
		return lines, err
	}
	w, ok := r.Context().Value(responseKey{}).(http.ResponseWriter)
	if !ok {
		return nil, errors.New("log follow: no response writer")
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	enc := json.NewEncoder(w)
	followCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { // end the follow once the job is final
		for ev, err := range a.m.bus.Jobs().Watch(followCtx, rec.ID) {
			if err != nil || ev.State.Final() {
				break
			}
		}
		stop()
	}()
	sent := 0
	for l, err := range a.m.bus.Outputs().Logs(followCtx, rec.ID, true) {
		if err != nil {
			break
		}
		_ = enc.Encode(l)
		flush()
		sent++
	}
	if ctx.Err() == nil { // the job ended: send what was logged meanwhile
		lines, _ := collectLogs(a.m, ctx, rec.ID)
		for _, l := range lines[min(sent, len(lines)):] {
			_ = enc.Encode(l)
		}
		flush()
	}
	return nil, nil
}

type responseKey struct{}

// jobID is the request's job id, without the ".json" suffix Asperathos
// clients may add to /submissions/{id}.
func jobID(r *http.Request) string { return strings.TrimSuffix(r.PathValue("id"), ".json") }

func collectLogs(m *Stage, ctx context.Context, job string) ([]*schemas.LogLine, error) {
	var out []*schemas.LogLine
	for l, err := range m.bus.Outputs().Logs(ctx, job, false) {
		if err != nil {
			return out, err
		}
		out = append(out, l)
	}
	return out, nil
}
