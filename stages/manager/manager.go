package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
)

// Users checks the username/password pairs of Asperathos submissions
// (enable_auth): the password is the user's bearer token.
// *auth.TokenFile implements it.
type Users interface {
	Lookup(token string) (auth.User, bool)
}

// Stage is the manager: it runs the job lifecycle. Its methods are safe for
// concurrent use.
type Stage struct {
	bus        *bus.Client
	cfg        Config
	clock      clock.WithTicker
	log        *slog.Logger
	users      Users
	authn      auth.Authenticator
	httpClient *http.Client

	// mu guards submitting (the jobs this process is creating), progress,
	// checks and inCheck.
	mu         sync.Mutex
	submitting map[string]bool

	inCheck  map[string]chan struct{} // by job, closed when its check ends; guarded by mu
	slots    chan struct{}            // one per job check running, Config.CheckConcurrency at most
	checking sync.WaitGroup           // the job checks running

	metrics  *strayMetrics
	sweepNow chan struct{} // a job ended or a stray item came: sweep for stray items soon

	// sweeping guards sightings and swept: one stray-item sweep at a time.
	sweeping  sync.Mutex
	sightings map[string]sighting // by work subject, items of jobs not found
	swept     sweepMark           // what the last whole sweep found

	progress map[string]progressMark // by running job; guarded by mu
	passes   uint64                  // job-check passes started; guarded by mu
	checks   map[string]jobCheck     // by running job; guarded by mu
}

// Option configures New.
type Option func(*Stage)

// WithClock sets the clock (default: the real one).
func WithClock(c clock.WithTicker) Option { return func(m *Stage) { m.clock = c } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(m *Stage) { m.log = l } }

// WithUsers sets the user table of Asperathos enable_auth submissions.
func WithUsers(u Users) Option { return func(m *Stage) { m.users = u } }

// WithAuthenticator sets who NATS requests come from (their Authorization
// header); HTTP requests are authenticated by auth.Middleware.
func WithAuthenticator(a auth.Authenticator) Option {
	return func(m *Stage) { m.authn = a }
}

// WithHTTPClient sets the client that downloads workloads.
func WithHTTPClient(c *http.Client) Option {
	return func(m *Stage) { m.httpClient = c }
}

// Deps is what the stage works on.
type Deps struct {
	Bus *bus.Client
}

// New returns a manager of the jobs on deps.Bus.
func New(deps Deps, cfg Config, opts ...Option) (*Stage, error) {
	c := deps.Bus
	if c == nil {
		return nil, errors.New("manager: Deps.Bus is nil")
	}
	cfg = cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("manager config: %w", errs.ToAggregate())
	}
	m := &Stage{bus: c, cfg: cfg, clock: clock.RealClock{}, log: slog.New(slog.DiscardHandler),
		httpClient: http.DefaultClient, submitting: map[string]bool{},
		metrics: newStrayMetrics(), sweepNow: make(chan struct{}, 1), sightings: map[string]sighting{},
		progress: map[string]progressMark{}, checks: map[string]jobCheck{},
		inCheck: map[string]chan struct{}{}, slots: make(chan struct{}, cfg.CheckConcurrency)}
	for _, opt := range opts {
		opt(m)
	}
	m.log = m.log.With("stage", "manager")
	return m, nil
}

// caller is who asks: the authenticated user and whether it may act on
// every job.
type caller struct {
	user  auth.User
	admin bool
}

func (m *Stage) callerOf(u auth.User) caller {
	return caller{user: u, admin: m.cfg.Open || u.IsAdmin()}
}

// refusesAnonymous reports whether u may not change jobs: anonymous callers
// are refused unless the API is open or Config.AllowAnonymous is set.
func (m *Stage) refusesAnonymous(u auth.User) bool {
	return u.IsAnonymous() && !m.cfg.Open && !m.cfg.AllowAnonymous
}

func (c caller) owns(rec *schemas.JobRecord) bool { return c.sees(rec.Spec.Owner) }

// sees reports whether the caller may see and change what owner owns.
func (c caller) sees(owner string) bool { return c.admin || c.user.Owns(owner) }

// submission is a parsed, validated job document.
type submission struct {
	spec   schemas.JobSpec
	format string
	items  []string
	owner  caller
	// warnings say what a lenient reading changed, for the job's log.
	warnings []string
	// prediction is the forecast of a batch job with a deadline.
	prediction *schemas.Prediction
}

// Formats of submitted documents.
const (
	FormatPace       = "pace"
	FormatAsperathos = "asperathos"
)

// Submit validates a job document (Pace's spec as JSON or YAML, or an
// Asperathos kubejobs submission), loads its workload and creates the job.
// A refused document returns a *schemas.APIError listing every invalid
// field; nothing is written to the bus for it.
func (m *Stage) Submit(ctx context.Context, u auth.User, doc []byte, contentType string) (*schemas.JobRecord, error) {
	return m.submit(ctx, u, doc, contentType, false)
}

// submit is Submit; lenient reads an Asperathos document as Asperathos did
// (relaxDoc, asperathosSpec), and the job's log keeps what was changed.
func (m *Stage) submit(ctx context.Context, u auth.User, doc []byte, contentType string, lenient bool) (*schemas.JobRecord, error) {
	sub, err := m.parse(ctx, m.callerOf(u), doc, contentType, lenient)
	if err != nil {
		return nil, err
	}
	rec, err := m.create(ctx, sub)
	if err != nil {
		return nil, err
	}
	for _, w := range sub.warnings {
		l := &schemas.LogLine{Job: rec.ID, At: m.clock.Now(), Source: "manager", Line: "warning: " + w}
		if err := m.bus.Outputs().PublishLog(ctx, l); err != nil {
			m.log.Warn("job log line lost", "job", rec.ID, "err", err)
		}
	}
	return rec, nil
}

// parse turns a document into a submission, or a *schemas.APIError.
func (m *Stage) parse(ctx context.Context, who caller, doc []byte, contentType string, lenient bool) (*submission, error) {
	mt, err := mediaType(contentType, doc, true)
	if err != nil {
		return nil, err
	}
	var yamlErrs field.ErrorList // values the YAML conversion could not write, null in the JSON
	if mt == mediaYAML {
		if doc, yamlErrs = yamlJSON(doc); doc == nil {
			return nil, invalid(yamlErrs)
		}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, invalid(field.ErrorList{field.Invalid(field.NewPath("body"), "", "invalid JSON: must be an object: "+err.Error())})
	}
	if top == nil {
		return nil, invalid(field.ErrorList{field.Required(field.NewPath("body"), "a job document")})
	}
	_, hasPlugin := top["plugin"]
	_, hasInfo := top["plugin_info"]
	sub := &submission{owner: who}
	var errs field.ErrorList
	if hasPlugin || hasInfo {
		sub.format = FormatAsperathos
		var d asperathosDoc
		var partial bool
		if lenient {
			doc, sub.warnings = relaxDoc(doc, reflect.TypeFor[asperathosDoc]())
		}
		errs, partial = decodeStrict(doc, &d, nil)
		if errs = merge(yamlErrs, errs); !partial {
			return nil, invalid(errs)
		}
		if d.EnableAuth != nil && *d.EnableAuth && d.Username != "" {
			u, ok := auth.User{}, false
			if m.users != nil {
				u, ok = m.users.Lookup(d.Password)
			}
			if !ok || u.Name != d.Username {
				return nil, apiError(http.StatusUnauthorized, "username or password rejected")
			}
			sub.owner = m.callerOf(u)
		}
		var more field.ErrorList
		var warnings []string
		sub.spec, warnings, more = asperathosSpec(&d, lenient)
		sub.warnings = append(sub.warnings, warnings...)
		if errs = merge(errs, more); len(errs) > 0 {
			return nil, invalid(errs)
		}
	} else {
		sub.format = FormatPace
		var partial bool
		errs, partial = decodeStrict(doc, &sub.spec, field.NewPath("spec"))
		if errs = merge(yamlErrs, errs); !partial {
			return nil, invalid(errs)
		}
	}
	if m.refusesAnonymous(sub.owner.user) {
		return nil, apiError(http.StatusUnauthorized, "submitting a job needs credentials")
	}
	switch owner := sub.spec.Owner; {
	case owner == "":
		sub.spec.Owner = sub.owner.user.Name
	case owner != sub.owner.user.Name && !sub.owner.admin:
		errs = append(errs, field.Forbidden(field.NewPath("spec", "owner"), "only admins submit jobs for other users"))
	}
	sub.spec = sub.spec.WithDefaults()
	more := sub.spec.Validate()
	more = append(more, m.checkPlugins(ctx, &sub.spec)...)
	more = append(more, m.checkRuntime(&sub.spec, sub.owner)...)
	more = append(more, m.checkQuota(ctx, &sub.spec)...)
	if sec := sub.spec.Worker.Security; sec != nil && sec.Privileged && !m.cfg.AllowPrivileged {
		more = append(more, field.Forbidden(field.NewPath("spec", "worker", "security", "privileged"),
			"privileged workers are not allowed on this Pace: its administrator allows them with --allow-privileged-workers"))
	}
	if at := sub.spec.Deadline.At; !at.IsZero() && !at.After(m.clock.Now()) {
		more = append(more, field.Invalid(field.NewPath("spec", "deadline"), sub.spec.Deadline.String(), "is in the past"))
	}
	errs = merge(errs, sub.inDocument(more))
	if len(errs) == 0 {
		if ferr := m.price(ctx, &sub.spec); ferr != nil {
			errs = append(errs, ferr)
		}
	}
	if len(errs) == 0 && sub.spec.Mode == schemas.Batch {
		items, ferr := m.loadWorkload(ctx, sub.spec.Workload, field.NewPath("spec", "workload"))
		if ferr != nil {
			errs = append(errs, ferr)
		}
		sub.items = items
	}
	if len(errs) > 0 {
		return nil, invalid(sub.inDocument(errs))
	}
	if sub.spec.Mode == schemas.Batch {
		sub.prediction = m.predict(ctx, &sub.spec, len(sub.items))
		if p := sub.prediction; p.Feasible != nil && !*p.Feasible {
			if sub.spec.DeadlinePolicy == schemas.DeadlineReject {
				return nil, infeasible(&sub.spec, p)
			}
			sub.warnings = append(sub.warnings, infeasible(&sub.spec, p).Message+" (deadline_policy warn: accepted)")
		}
	}
	return sub, nil
}

// checkRuntime refuses a job the local actuator would run for a caller
// Config.LocalExec does not let run commands on this host, and replica
// bounds it cannot meet: it runs at most Config.LocalMaxReplicas workers of
// a job. A job without a worker spec is never actuated.
func (m *Stage) checkRuntime(spec *schemas.JobSpec, who caller) field.ErrorList {
	limit, name := m.cfg.LocalMaxReplicas, spec.Actuator.Name
	local := name == schemas.LocalActuator || name == "" && limit != 0
	if !local || !spec.Worker.Runs() {
		return nil
	}
	var errs field.ErrorList
	switch {
	case m.cfg.LocalExec == LocalExecNone:
		errs = append(errs, field.Forbidden(field.NewPath("spec", "worker"),
			"this Pace runs no workers on its host (--local-exec=none): submit the job for Kubernetes, or without a worker spec and run pace worker yourself"))
	case m.cfg.LocalExec == LocalExecAdmins && !who.admin:
		errs = append(errs, field.Forbidden(field.NewPath("spec", "worker"),
			"workers run on this host, which only admins may ask for here (--local-exec=admins)"))
	}
	if limit == 0 {
		return errs
	}
	p := field.NewPath("spec", "replicas")
	for _, f := range []struct {
		name string
		v    int
	}{{"min", spec.Replicas.Min}, {"max", spec.Replicas.Max}, {"initial", spec.Replicas.Initial}} {
		if f.v > limit {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v,
				fmt.Sprintf("must be at most %d, the workers the local actuator runs for one job", limit)))
		}
	}
	return errs
}

// create assigns an id and runs the job's first transitions.
func (m *Stage) create(ctx context.Context, sub *submission) (*schemas.JobRecord, error) {
	if err := m.admit(ctx, sub); err != nil {
		return nil, err
	}
	return m.createAs(ctx, m.newID(sub), sub)
}

// createAs runs the first transitions of job id.
func (m *Stage) createAs(ctx context.Context, id string, sub *submission) (*schemas.JobRecord, error) {
	m.mu.Lock()
	m.submitting[id] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.submitting, id)
		m.mu.Unlock()
	}()
	spec := sub.spec
	spec.Workload.Items = nil // the items live on the queue, not in the record
	var tp string             // the job's trace: this span, which its items, decisions and Kubernetes calls descend from
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = tracing.Tracer().Start(ctx, "create job", trace.WithAttributes(attribute.String("pace.job", id),
			attribute.String("pace.job.owner", sub.owner.user.Name), attribute.String("pace.job.mode", string(spec.Mode)),
			attribute.Int("pace.job.items", len(sub.items))))
		defer span.End()
		tp = tracing.Traceparent(span.SpanContext())
	}
	rec, err := m.emit(ctx, &schemas.JobEvent{Job: id, Type: schemas.EventCreated, State: schemas.Created,
		Spec: &spec, Format: sub.format, Total: len(sub.items), Prediction: sub.prediction, Trace: tp,
		Reason: fmt.Sprintf("submitted by %s", sub.owner.user.Name)})
	if err != nil {
		return nil, err
	}
	if err := m.bus.Queues().EnsureWork(ctx, rec); err != nil {
		return nil, m.undo(ctx, id, err) // no room for its user's work stream: 507
	}
	if err := m.bus.QueueWorkload(ctx, id, sub.items); err != nil {
		return nil, m.undo(ctx, id, err)
	}
	rec, err = m.emit(ctx, &schemas.JobEvent{Job: id, Type: schemas.EventStarted, State: schemas.Ongoing,
		Total: len(sub.items), Replicas: spec.Replicas.Initial})
	if err != nil {
		return nil, m.fail(ctx, id, err)
	}
	m.log.Info("job submitted", "job", id, "format", sub.format, "owner", spec.Owner, "mode", spec.Mode, "items", len(sub.items))
	return rec, nil
}

// fail puts a job that could not be created in the error state and returns err.
func (m *Stage) fail(ctx context.Context, job string, err error) error {
	if _, eerr := m.emit(context.WithoutCancel(ctx), &schemas.JobEvent{Job: job, Type: schemas.EventError,
		State: schemas.Error, Reason: err.Error()}); eerr != nil {
		m.log.Error("job error not recorded", "job", job, "err", eerr)
	}
	return fmt.Errorf("create job %s: %w", job, err)
}

func (m *Stage) newID(sub *submission) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])[:7]
	if sub.format == FormatAsperathos {
		return "kj-" + suffix
	}
	if slug := slugify(sub.spec.Name); slug != "" {
		return slug + "-" + suffix
	}
	return "job-" + suffix
}

// slugify keeps the token-safe characters of a job name, lower-cased.
func slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

func invalid(errs field.ErrorList) *schemas.APIError { return invalidAs("submission", errs) }

// invalidAs is a 400 naming every invalid field of a what.
func invalidAs(what string, errs field.ErrorList) *schemas.APIError {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return &schemas.APIError{Code: http.StatusBadRequest, Name: errorName(http.StatusBadRequest),
		Message: "invalid " + what + ": " + strings.Join(msgs, "; "), Details: schemas.FieldErrors(errs)}
}

func apiError(code int, format string, args ...any) *schemas.APIError {
	return &schemas.APIError{Code: code, Name: errorName(code), Message: fmt.Sprintf(format, args...)}
}

// errorName is the Asperathos-style error_name of a status code.
func errorName(code int) string {
	return strings.ReplaceAll(strings.ToUpper(http.StatusText(code)), " ", "_")
}

// asAPIError returns err as an APIError, a 500 for errors that are not.
func asAPIError(err error) *schemas.APIError {
	var apiErr *schemas.APIError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	if errors.Is(err, bus.ErrJobNotFound) {
		return apiError(http.StatusNotFound, "%v", err)
	}
	return apiError(http.StatusInternalServerError, "%v", err)
}
