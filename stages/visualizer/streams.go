package visualizer

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/promset"
	"github.com/pace-platform/pace/schemas"
)

// streams counts the open event streams, in all and per user, and refuses
// one beyond Config.MaxStreams or Config.MaxStreamsPerUser. The UI's
// streams are outside API Priority and Fairness (each lives as long as its
// page), so this is what bounds them.
type streams struct {
	maxTotal, maxPerUser int
	open                 prometheus.Gauge
	refused              *prometheus.CounterVec

	mu     sync.Mutex
	total  int            // guarded by mu
	byUser map[string]int // guarded by mu
}

// streamRetryAfter is the Retry-After of a refused stream, in seconds.
const streamRetryAfter = 5

func newStreams(cfg Config) *streams {
	return &streams{maxTotal: cfg.MaxStreams, maxPerUser: cfg.MaxStreamsPerUser, byUser: map[string]int{},
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pace_ui_open_streams",
			Help: "Event streams of the web UI open now (jobs list, job pages, flow control).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pace_ui_streams_refused_total",
			Help: "Event streams of the web UI refused with 429, by the bound reached: user (one user's streams) or total.",
		}, []string{"reason"}),
	}
}

// acquire counts a stream of u, or returns the 429 *schemas.APIError of
// the bound it would pass. release uncounts it.
func (s *streams) acquire(u auth.User) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.byUser[u.Name] >= s.maxPerUser:
		s.refused.WithLabelValues("user").Inc()
		return nil, tooManyStreams(fmt.Sprintf("%s has %d event streams open, the most one user may: close a page", u.Name, s.maxPerUser))
	case s.total >= s.maxTotal:
		s.refused.WithLabelValues("total").Inc()
		return nil, tooManyStreams(fmt.Sprintf("%d event streams are open, the most this server serves: try again later", s.maxTotal))
	}
	s.total++
	s.byUser[u.Name]++
	s.open.Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.byUser[u.Name]--; s.byUser[u.Name] == 0 {
				delete(s.byUser, u.Name)
			}
			s.open.Dec()
		})
	}, nil
}

func tooManyStreams(msg string) *schemas.APIError {
	return &schemas.APIError{Code: http.StatusTooManyRequests, Name: "TOO_MANY_REQUESTS", Message: msg, RetryAfter: streamRetryAfter}
}

var errUnauthenticated = &schemas.APIError{Code: http.StatusUnauthorized, Name: "UNAUTHORIZED",
	Message: "the UI's event streams need a bearer token: enter your API token"}

// openStream admits an event stream of r's caller: refused with 401
// without credentials (unless Config.Open), with 429 beyond the bounds.
// The caller must call release when the stream ends.
func (s *Stage) openStream(w http.ResponseWriter, r *http.Request) (u auth.User, release func(), ok bool) {
	u = user(r)
	if u.IsAnonymous() && !s.cfg.Open {
		writeError(w, errUnauthenticated)
		return u, nil, false
	}
	release, err := s.streams.acquire(u)
	if err != nil {
		writeError(w, err)
		return u, nil, false
	}
	return u, release, true
}

// Metrics returns the UI's Prometheus metrics: pace_ui_open_streams and
// pace_ui_streams_refused_total{reason}.
func (s *Stage) Metrics() prometheus.Collector {
	return promset.Set{s.streams.open, s.streams.refused}
}

// wakeups fans the job events that Run follows out to the open streams, so
// that a stream costs no JetStream consumer of its own: before, each one
// followed the job events itself, and every connection, however short,
// left a consumer behind on the server.
type wakeups struct {
	mu   sync.Mutex
	subs map[chan struct{}]string // guarded by mu; the job each waits for, "" for any
}

// subscribe returns a channel woken by the events of job ("" for every
// job), and the func that ends the subscription.
func (h *wakeups) subscribe(job string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[chan struct{}]string{}
	}
	h.subs[ch] = job
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, ch)
	}
}

// wake wakes the subscribers to job and to every job; a subscriber already
// woken stays so.
func (h *wakeups) wake(job string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch, j := range h.subs {
		if j == "" || j == job {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Run follows every job's events with one reader and wakes the open
// streams they concern, until ctx ends (then it returns nil). Without Run
// the streams still refresh every Config.Interval. A failed read is
// logged and started again after Config.Interval.
func (s *Stage) Run(ctx context.Context) error {
	for {
		for ev, err := range s.bus.Jobs().Events(ctx, "", true) {
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("job events not followed; streams refresh every interval meanwhile", "err", err)
				}
				break
			}
			s.wakeups.wake(ev.Job)
		}
		t := time.NewTimer(s.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// retryAfter sets the Retry-After header of a refusal that has one.
func retryAfter(w http.ResponseWriter, e *schemas.APIError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
}
