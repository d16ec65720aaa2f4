package visualizer

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

//go:embed static
var static embed.FS

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

// Bus reads a job's work, progress, events and log; *bus.Client implements it.
type Bus interface {
	JobWork(ctx context.Context, rec *schemas.JobRecord) (bus.WorkState, error)
	Jobs() bus.Jobs       // a job's events
	Outputs() bus.Outputs // a job's progress and log
}

// Config holds the UI's settings.
type Config struct {
	// Interval is how often a stream re-reads the bus; 0 means 1s. A job
	// event wakes the jobs list stream at once.
	Interval time.Duration `json:"interval"`
	// LogTail is how many log lines the job page shows; 0 means 50.
	LogTail int `json:"log_tail"`
	// Open shows every job, serves the event streams to callers without
	// credentials and the flow-control page to every caller, not only
	// admins (the API has no authentication).
	Open bool `json:"open"`
	// MaxStreams bounds the event streams open at once; beyond it a new
	// one is refused with 429. 0 means 256.
	MaxStreams int `json:"max_streams"`
	// MaxStreamsPerUser bounds the event streams of one user (every
	// caller is one anonymous user when Open); 0 means 8.
	MaxStreamsPerUser int `json:"max_streams_per_user"`
	// AnswerWait is how long the flow-control page waits for the answers
	// of the processes holding APF state (SetRemoteFlowControl); 0 means
	// 500ms.
	AnswerWait time.Duration `json:"answer_wait"`
	// TraceURL, when set, links a job's page to its trace: a URL with
	// {trace_id}, e.g. http://jaeger:16686/trace/{trace_id}.
	TraceURL string `json:"trace_url"`
}

// Defaults fills the zero fields of c.
func (c Config) Defaults() Config {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.LogTail <= 0 {
		c.LogTail = 50
	}
	if c.AnswerWait <= 0 {
		c.AnswerWait = 500 * time.Millisecond
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 256
	}
	if c.MaxStreamsPerUser <= 0 {
		c.MaxStreamsPerUser = 8
	}
	return c
}

// Stage is the visualizer: the web UI.
type Stage struct {
	bus Bus
	cfg Config
	log *slog.Logger
	// fcView reads the flow-control page's data; nil: no such page.
	fcView func(context.Context) (*FlowControlView, error)
	// streams counts the open event streams; wakeups wakes them on job
	// events (Run).
	streams *streams
	wakeups wakeups
}

// Option configures a Stage.
type Option func(*Stage)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Stage) { s.log = l } }

// Deps is what the stage works on: the bus it reads jobs and streams their
// progress from.
type Deps struct {
	Bus Bus
}

// New returns the UI over deps. Run wakes its streams on job events.
func New(deps Deps, cfg Config, opts ...Option) (*Stage, error) {
	b := deps.Bus
	if b == nil {
		return nil, errors.New("visualizer: Deps.Bus is required")
	}
	cfg = cfg.Defaults()
	s := &Stage{bus: b, cfg: cfg, log: slog.New(slog.DiscardHandler), streams: newStreams(cfg)}
	for _, opt := range opts {
		opt(s)
	}
	s.log = s.log.With("stage", "visualizer")
	return s, nil
}

// Register adds the UI's routes under Prefix to mux.
func (s *Stage) Register(mux *http.ServeMux) {
	sub, _ := fs.Sub(static, "static")
	files := http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	mux.Handle("GET "+Prefix+"static/", files)
	page := func(w http.ResponseWriter, _ *http.Request) {
		b, _ := static.ReadFile("static/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'")
		_, _ = w.Write(b)
	}
	mux.HandleFunc("GET "+Prefix+"{$}", page)
	mux.HandleFunc("GET "+Prefix+"jobs/{id}", page)
	mux.HandleFunc("GET "+Prefix+"flowcontrol", page)
	mux.HandleFunc("GET "+Prefix+"events/flowcontrol", s.flowControlEvents)
	mux.HandleFunc("GET "+Prefix+"events/jobs", s.listEvents)
	mux.HandleFunc("GET "+Prefix+"events/jobs/{id}", s.jobEvents)
}

// JobURL is the path of a job's page.
func JobURL(id string) string { return Prefix + "jobs/" + id }

func user(r *http.Request) auth.User {
	if u, ok := auth.FromContext(r.Context()); ok {
		return u
	}
	return auth.AnonymousUser()
}

// stream is one Server-Sent Events response.
type stream struct {
	w http.ResponseWriter
	f http.Flusher
}

func startStream(w http.ResponseWriter) (*stream, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &stream{w: w, f: f}, true
}

// send writes one event whose data is v as JSON.
func (st *stream) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := st.w.Write([]byte("event: " + event + "\ndata: " + string(b) + "\n\n")); err != nil {
		return err
	}
	st.f.Flush()
	return nil
}

var errForbidden = &schemas.APIError{Code: http.StatusForbidden, Name: "FORBIDDEN", Message: "flow control is shown to admins only"}

func writeError(w http.ResponseWriter, err error) {
	e := &schemas.APIError{Code: http.StatusInternalServerError, Name: "INTERNAL_SERVER_ERROR", Message: err.Error()}
	var ae *schemas.APIError
	if errors.As(err, &ae) {
		e = ae
	}
	if e.Code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pace"`)
	}
	retryAfter(w, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Code)
	_ = json.NewEncoder(w).Encode(e)
}

// JobRow is one line of the jobs list.
type JobRow struct {
	ID       string           `json:"id"`
	Name     string           `json:"name"`
	Owner    string           `json:"owner"`
	State    schemas.JobState `json:"state"`
	Progress float64          `json:"progress"`
	Done     int              `json:"done"`
	Total    int              `json:"total,omitempty"` // absent for streaming jobs
	Replicas int              `json:"replicas"`
	Deadline *time.Time       `json:"deadline,omitempty"`
	Created  time.Time        `json:"created_at"`
}

func (s *Stage) rows(ctx context.Context, u auth.User) ([]JobRow, error) {
	recs, err := s.jobs(ctx, u)
	if err != nil {
		return nil, err
	}
	rows := make([]JobRow, 0, len(recs))
	for _, rec := range recs {
		row := JobRow{ID: rec.ID, Name: rec.Spec.Name, Owner: rec.Spec.Owner, State: rec.State,
			Total: rec.Total, Replicas: rec.Replicas, Created: rec.CreatedAt}
		if ws, err := s.bus.JobWork(ctx, rec); err == nil {
			row.Done = ws.Results + ws.Dead
			if rec.Total > 0 {
				row.Progress = min(1, float64(row.Done)/float64(rec.Total))
			}
		}
		if rec.State == schemas.Completed {
			row.Progress = 1
		}
		if !rec.StartedAt.IsZero() {
			if dl := rec.Spec.Deadline.Time(rec.StartedAt); !dl.IsZero() {
				row.Deadline = &dl
			}
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b JobRow) int { return b.Created.Compare(a.Created) })
	return rows, nil
}

// listEvents streams the jobs list: a "jobs" event when it changes.
func (s *Stage) listEvents(w http.ResponseWriter, r *http.Request) {
	u, release, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer release()
	ctx := r.Context()
	rows, err := s.rows(ctx, u)
	if err != nil {
		writeError(w, err)
		return
	}
	st, ok := startStream(w)
	if !ok {
		return
	}
	wake, unsubscribe := s.wakeups.subscribe("") // any job event wakes the stream
	defer unsubscribe()
	s.loop(ctx, st, wake, "jobs", rows, func() (any, error) { return s.rows(ctx, u) })
}

// loop sends first, then what next returns whenever it differs from the
// last event sent, reading each interval or when woken, until ctx ends or
// next reports done.
func (s *Stage) loop(ctx context.Context, st *stream, wake <-chan struct{}, event string, first any, next func() (any, error)) {
	last, _ := json.Marshal(first)
	if st.send(event, first) != nil {
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		v, err := next()
		if err != nil {
			if ctx.Err() == nil {
				_ = st.send("failure", map[string]string{"message": err.Error()})
			}
			return
		}
		b, _ := json.Marshal(v)
		if string(b) == string(last) {
			continue
		}
		last = b
		if st.send(event, v) != nil {
			return
		}
	}
}

// trimID strips the ".json" a client may add.
func trimID(r *http.Request) string { return strings.TrimSuffix(r.PathValue("id"), ".json") }
