package apfhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/internal/auth"
)

// The response headers naming the classification, as kube-apiserver sets them.
const (
	HeaderFlowSchemaUID    = "X-Kubernetes-PF-FlowSchema-UID"
	HeaderPriorityLevelUID = "X-Kubernetes-PF-PriorityLevel-UID"
)

// FilterOption tunes Middleware.
type FilterOption func(*filterOptions)

type filterOptions struct {
	learnCounts bool
	errors      auth.ErrorWriter
}

// WithErrorWriter writes the filter's refusals (429, 400, 500) with ew
// instead of Pace's JSON envelope; `pace gate proxy` writes kube's Status.
func WithErrorWriter(ew auth.ErrorWriter) FilterOption {
	return func(o *filterOptions) { o.errors = ew }
}

// errorWriter returns ew, or the envelope writer when it is nil.
func errorWriter(ew auth.ErrorWriter) auth.ErrorWriter {
	if ew == nil {
		return writeError
	}
	return ew
}

// LearnObjectCounts makes the filter learn each resource's object count and
// average object size from the JSON lists it serves: a cluster-wide list
// with no selector and no continue token holds every object of its resource
// (plus metadata.remainingItemCount when limited), which kube-apiserver
// would know from its storage. The counts go to the gate's ObjectCounts and
// price later lists. `pace gate proxy` uses it in front of kube-apiserver.
func LearnObjectCounts() FilterOption {
	return func(o *filterOptions) { o.learnCounts = true }
}

// Middleware returns the APF HTTP filter. It reads the caller from
// auth.FromContext (put there by auth.Middleware, which must run first; no
// identity means system:anonymous), resolves the request with resolve,
// estimates its work from its attributes and list options (Gate.Admit),
// classifies and queues it, and either runs next once dispatched or answers
// 429 Too Many Requests with Retry-After and the JSON envelope
//
//	{"error_code":429,"error_name":"TooManyRequests","error_message":"..."}
//
// Long-running requests other than watches bypass it; a watch holds its seat
// until its response starts (kube's watch initialization) and counts in
// Gate.Watches until it ends. With APF disabled (Config.Disabled) it applies
// the two max-inflight limits instead.
//
//	handler := auth.Middleware(authn)(apfhttp.ReadBody(limits)(apfhttp.Middleware(gate, api.Resolver())(mux)))
func Middleware(g *apf.Gate, resolve Resolver, opts ...FilterOption) func(http.Handler) http.Handler {
	cfg, m := g.Config(), g.Metrics()
	var o filterOptions
	for _, opt := range opts {
		opt(&o)
	}
	refuse := errorWriter(o.errors)
	if cfg.Disabled {
		return maxInflight(cfg, m, resolve, refuse)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ri := resolve(r)
			if ri.LongRunning && !ri.IsWatch() {
				next.ServeHTTP(w, r)
				return
			}
			attrs := Attributes(r, ri)
			query := r.URL.Query()
			wr := apf.WorkRequest(attrs, query)
			kind := "regular"
			if ri.IsWatch() {
				kind = "watch"
			}
			var wait time.Duration // a watch has no deadline in kube: it waits the default 15 s
			if !ri.IsWatch() {
				timeout, err := requestTimeout(cfg, query)
				if err != nil {
					refuse(w, http.StatusBadRequest, err.Error())
					return
				}
				// A quarter of the request's time, as kube-apiserver; the
				// time bounds the wait only, not the execution: Pace's own
				// handlers time themselves.
				wait = timeout / 4
			}
			adm, err := g.AdmitWithin(r.Context(), attrs, wr, kind, wait, func(inQueue bool) {
				delta := -1
				if inQueue {
					delta = 1
				}
				m.RequestKind(ri.IsReadOnly(), apf.Waiting, delta)
			})
			if err != nil {
				var rej *flowcontrol.RejectedError
				if errors.As(err, &rej) {
					terminated(m, r, ri, http.StatusTooManyRequests)
					c := g.Classify(attrs)
					setClassificationHeaders(w, c)
					tooManyRequests(w, refuse, rej.RetryAfter.Seconds(), rej.Error())
					return
				}
				refuse(w, http.StatusInternalServerError, err.Error())
				return
			}
			setClassificationHeaders(w, adm.Classification)
			executing := func(delta int) { m.RequestKind(ri.IsReadOnly(), apf.Executing, delta) }
			if ri.IsWatch() { // executing until it has started, as kube counts it
				serveWatch(adm, g.Watches().Register(wr), executing, next, w, r)
				return
			}
			executing(1)
			defer executing(-1)
			switch {
			case o.learnCounts && countsWholeResource(ri, query):
				lc := &listCounter{ResponseWriter: w}
				defer func() { learn(g.ObjectCounts(), ri.APIGroup, ri.Resource, lc.finish()) }() // also ends the decoder on a panic
				adm.Finish(func() { next.ServeHTTP(lc, r) })
			default:
				adm.Finish(func() { next.ServeHTTP(w, r) })
			}
		})
	}
}

// requestTimeout is a request's time, from which its queue wait is a
// quarter: its ?timeout= (a Go duration, as kube-apiserver reads it), at
// most Config.RequestTimeout, which is also the time of a request that
// names none.
func requestTimeout(cfg apf.Config, query url.Values) (time.Duration, error) {
	limit := cfg.RequestTimeoutOrDefault()
	v := query.Get("timeout")
	if v == "" {
		return limit, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("invalid timeout specified in the request URL - %w", err)
	}
	if d <= 0 || d > limit {
		return limit, nil
	}
	return d, nil
}

// Attributes combines the caller from ctx (anonymous if none) with ri.
func Attributes(r *http.Request, ri RequestInfo) policy.Attributes {
	u, ok := auth.FromContext(r.Context())
	if !ok || u.Name == "" {
		u = auth.AnonymousUser()
	}
	return policy.Attributes{User: u.Name, Groups: u.Groups, IsResourceRequest: ri.IsResourceRequest, Verb: ri.Verb,
		APIGroup: ri.APIGroup, APIVersion: ri.APIVersion, Resource: ri.Resource, Subresource: ri.Subresource,
		Namespace: ri.Namespace, Name: ri.Name, Path: ri.Path}
}

var (
	canonicalFlowSchemaUID    = http.CanonicalHeaderKey(HeaderFlowSchemaUID)
	canonicalPriorityLevelUID = http.CanonicalHeaderKey(HeaderPriorityLevelUID)
)

func setClassificationHeaders(w http.ResponseWriter, c policy.Classification) {
	h := w.Header() // the names as net/http keeps them: no canonicalizing per request
	h[canonicalFlowSchemaUID] = []string{apf.UID("FlowSchema", c.FlowSchema.Name, string(c.FlowSchema.UID))}
	h[canonicalPriorityLevelUID] = []string{apf.UID("PriorityLevelConfiguration", c.PriorityLevel.Name, string(c.PriorityLevel.UID))}
}

func tooManyRequests(w http.ResponseWriter, refuse auth.ErrorWriter, retryAfterSeconds float64, msg string) {
	w.Header().Set("Retry-After", fmt.Sprint(max(1, int(math.Ceil(retryAfterSeconds)))))
	refuse(w, http.StatusTooManyRequests, msg)
}

// errorNames are the envelope's error_name by status.
var errorNames = map[int]string{
	http.StatusBadRequest:            "BadRequest",
	http.StatusRequestTimeout:        "RequestTimeout",
	http.StatusRequestEntityTooLarge: "RequestEntityTooLarge",
	http.StatusTooManyRequests:       "TooManyRequests",
	http.StatusInternalServerError:   "InternalError",
}

// writeError is the default auth.ErrorWriter: Pace's JSON envelope.
func writeError(w http.ResponseWriter, code int, msg string) {
	name, ok := errorNames[code]
	if !ok {
		name = strings.ReplaceAll(http.StatusText(code), " ", "")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct {
		Code    int    `json:"error_code"`
		Name    string `json:"error_name"`
		Message string `json:"error_message"`
	}{code, name, msg})
}

// serveWatch runs a watch: its execution (its seat, and its count among the
// executing requests of apiserver_current_inflight_requests) ends when the
// handler starts the response or returns, while the handler goes on
// streaming, as kube-apiserver ends it at the watch's initialization;
// forget ends its count among the watches when the handler returns.
func serveWatch(adm *apf.Admission, forget func(), executing func(delta int), next http.Handler, w http.ResponseWriter, r *http.Request) {
	sw := &startWriter{ResponseWriter: w, started: make(chan struct{})}
	done := make(chan any, 1)
	adm.Finish(func() {
		executing(1)
		defer executing(-1)
		go func() {
			defer func() { done <- recover() }()
			defer forget()
			next.ServeHTTP(sw, r)
		}()
		select {
		case <-sw.started:
		case p := <-done:
			done <- p // keep it for below
		}
	})
	if p := <-done; p != nil {
		panic(p)
	}
}

// startWriter closes started on the first WriteHeader, Write or Flush.
type startWriter struct {
	http.ResponseWriter
	once    sync.Once
	started chan struct{}
}

func (s *startWriter) start() { s.once.Do(func() { close(s.started) }) }

func (s *startWriter) WriteHeader(code int) { s.ResponseWriter.WriteHeader(code); s.start() }

func (s *startWriter) Write(b []byte) (int, error) {
	n, err := s.ResponseWriter.Write(b)
	s.start()
	return n, err
}

// Flush implements http.Flusher.
func (s *startWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	s.start()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *startWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
