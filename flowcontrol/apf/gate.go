package apf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/work"
	"github.com/pace-platform/pace/internal/tracing"
)

// Config holds the server-wide settings of a Gate, with kube-apiserver's
// flag names and defaults.
type Config struct {
	// MaxRequestsInflight (--max-requests-inflight, 400) and
	// MaxMutatingRequestsInflight (--max-mutating-requests-inflight, 200) sum
	// to the server concurrency limit shared by the priority levels. With APF
	// disabled they are the two plain limits for read-only and mutating requests.
	MaxRequestsInflight         int `json:"maxRequestsInflight"`
	MaxMutatingRequestsInflight int `json:"maxMutatingRequestsInflight"`
	// Disabled turns APF off (--enable-priority-and-fairness=false).
	Disabled bool `json:"disabled,omitempty"`
	// RequestTimeout (--request-timeout, 1m) is a request's time when it
	// names none with ?timeout=, and the most it may name. A request may
	// wait in its queue for a quarter of it (15 s by default), as in
	// kube-apiserver; watches wait the default 15 s. Zero means 1m.
	RequestTimeout time.Duration `json:"requestTimeout,omitempty"`
	// ConsistentReadsFromStorage charges lists without a resourceVersion as
	// reads from etcd, as kube-apiserver serves them when its etcd cannot
	// answer watch progress requests (before etcd 3.4.31 and 3.5.13).
	// false: they are served from the watch cache, as by kube-apiserver
	// v1.37 with a current etcd (ConsistentListFromCache).
	ConsistentReadsFromStorage bool `json:"consistentReadsFromStorage,omitempty"`
}

// DefaultRequestTimeout is kube-apiserver's --request-timeout default.
const DefaultRequestTimeout = time.Minute

// DefaultConfig returns kube-apiserver's defaults: 400 + 200, APF enabled.
func DefaultConfig() Config {
	return Config{MaxRequestsInflight: 400, MaxMutatingRequestsInflight: 200, RequestTimeout: DefaultRequestTimeout}
}

// RequestTimeoutOrDefault is RequestTimeout, or DefaultRequestTimeout when
// it is zero.
func (c Config) RequestTimeoutOrDefault() time.Duration {
	if c.RequestTimeout > 0 {
		return c.RequestTimeout
	}
	return DefaultRequestTimeout
}

// Validate checks the limits.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.MaxRequestsInflight < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxRequestsInflight"), c.MaxRequestsInflight, "must not be negative"))
	}
	if c.MaxMutatingRequestsInflight < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxMutatingRequestsInflight"), c.MaxMutatingRequestsInflight, "must not be negative"))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, field.Invalid(field.NewPath("requestTimeout"), c.RequestTimeout.String(), "must not be negative"))
	}
	if !c.Disabled && c.MaxRequestsInflight+c.MaxMutatingRequestsInflight <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxRequestsInflight"), c.MaxRequestsInflight, "the two limits must sum to a positive number"))
	}
	return errs
}

// ServerConcurrencyLimit is the seat total of the priority levels.
func (c Config) ServerConcurrencyLimit() int {
	return c.MaxRequestsInflight + c.MaxMutatingRequestsInflight
}

// Gate admits requests by API Priority and Fairness under a live policy.
type Gate struct {
	clk       eventclock.Interface
	cfg       Config
	metrics   *Metrics
	watches   *WatchTracker
	objects   *ObjectCounts
	estimator *work.Estimator

	reconf sync.Mutex   // serialises Reconfigure
	mu     sync.RWMutex // guards cur
	cur    *generation
}

// generation is one policy and the engine built for it.
type generation struct {
	digest *policy.Digest
	cfg    flowcontrol.Config // ctl's configuration
	ctl    *flowcontrol.Controller
}

// New builds a Gate for cfg and objs (normally policy.Overlay(policy.Defaults(), file)).
// Invalid objects are ignored as kube-apiserver ignores them (see policy.Compile).
// metrics may be nil.
func New(clk eventclock.Interface, cfg Config, objs policy.Objects, metrics *Metrics) (*Gate, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	g := &Gate{clk: clk, cfg: cfg, metrics: metrics, watches: NewWatchTracker(), objects: NewObjectCounts()}
	gen, err := g.build(objs)
	if err != nil {
		return nil, err
	}
	g.cur = gen
	// Reconfigure keeps the engine, so its per-level caps stay current.
	est := work.DefaultEstimatorConfig()
	est.ConsistentReadFromCache = !cfg.ConsistentReadsFromStorage
	g.estimator = work.NewEstimator(est, g.objects, g.watches, gen.ctl.MaxSeats)
	metrics.attach(g)
	return g, nil
}

func (g *Gate) build(objs policy.Objects) (*generation, error) {
	d, cfg := g.compile(objs)
	ctl, err := flowcontrol.New(g.clk, cfg, flowcontrol.WithQueueObserver(g.metrics.queueChanged))
	if err != nil {
		return nil, fmt.Errorf("flowcontrol engine: %w", err)
	}
	return &generation{digest: d, cfg: cfg, ctl: ctl}, nil
}

// compile digests objs and derives the engine's configuration.
func (g *Gate) compile(objs policy.Objects) (*policy.Digest, flowcontrol.Config) {
	d := policy.Compile(objs)
	cfg := flowcontrol.Config{ServerConcurrencyLimit: max(1, g.cfg.ServerConcurrencyLimit())}
	for _, pl := range d.PriorityLevels() {
		cfg.Levels = append(cfg.Levels, engineLevel(pl))
	}
	return d, cfg
}

func engineLevel(pl *flowcontrolv1.PriorityLevelConfiguration) flowcontrol.PriorityLevel {
	l := flowcontrol.PriorityLevel{Name: pl.Name}
	switch {
	case pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt:
		l.Exempt = true
		if e := pl.Spec.Exempt; e != nil {
			l.NominalConcurrencyShares = int(deref(e.NominalConcurrencyShares))
			l.LendablePercent = int(deref(e.LendablePercent))
		}
	case pl.Spec.Limited != nil:
		lim := pl.Spec.Limited
		l.NominalConcurrencyShares = int(deref(lim.NominalConcurrencyShares))
		l.LendablePercent = int(deref(lim.LendablePercent))
		if lim.BorrowingLimitPercent != nil {
			b := int(*lim.BorrowingLimitPercent)
			l.BorrowingLimitPercent = &b
		}
		if q := lim.LimitResponse.Queuing; lim.LimitResponse.Type == flowcontrolv1.LimitResponseTypeQueue && q != nil {
			l.Queues, l.HandSize, l.QueueLengthLimit = int(q.Queues), int(q.HandSize), int(q.QueueLengthLimit)
		} else {
			l.Reject = true
		}
	}
	return l
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// Watches returns the watches in progress through the gate's HTTP filter,
// the watch counts of its work estimator.
func (g *Gate) Watches() *WatchTracker { return g.watches }

// ObjectCounts returns the object counts of its work estimator; feed them
// with what the process knows (see ObjectCounts).
func (g *Gate) ObjectCounts() *ObjectCounts { return g.objects }

// Metrics returns the gate's metrics (nil when it has none), for the front
// ends that count their own requests in them.
func (g *Gate) Metrics() *Metrics { return g.metrics }

// Config returns the server-wide settings.
func (g *Gate) Config() Config { return g.cfg }

func (g *Gate) current() *generation {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.cur
}

// Digest returns the policy in force.
func (g *Gate) Digest() *policy.Digest { return g.current().digest }

// Reconfigure installs a new policy. Classification switches at once; the
// engine is reconfigured in place (flowcontrol.Controller.Reconfigure): a
// priority level that stays keeps its queues and seats, a removed one drains
// its waiting and executing requests before it goes, so nothing queued is
// dropped. Concurrent calls are serialised.
func (g *Gate) Reconfigure(_ context.Context, objs policy.Objects) error {
	g.reconf.Lock()
	defer g.reconf.Unlock()
	cur := g.current()
	d, cfg := g.compile(objs)
	if !reflect.DeepEqual(cfg, cur.cfg) {
		if err := cur.ctl.Reconfigure(cfg); err != nil {
			return fmt.Errorf("flowcontrol engine: %w", err)
		}
	}
	g.mu.Lock()
	g.cur = &generation{digest: d, cfg: cfg, ctl: cur.ctl}
	g.mu.Unlock()
	return nil
}

// Run runs the borrowing adjustment of the engine in force (every 10 s of the
// gate's clock) and publishes the last-second peaks of the request-kind
// metrics, until ctx ends; it returns nil.
func (g *Gate) Run(ctx context.Context) error {
	ctl := g.current().ctl // the same engine for the gate's life
	borrowingDone := make(chan struct{})
	go func() { defer close(borrowingDone); _ = ctl.Run(ctx) }()
	defer func() { <-borrowingDone }()
	eventclock.Every(ctx, g.clk, time.Second, func() { g.metrics.tick(g) })
	return nil
}

// PublishPeaks does now what Run does every second of the gate's clock: it
// publishes the last second's peaks of the request-kind metrics and samples
// the utilization histograms. For callers that drive the gate's clock
// themselves, such as tests and simulations, and do not run Run.
func (g *Gate) PublishPeaks() { g.metrics.tick(g) }

// Classify classifies a without admitting it.
func (g *Gate) Classify(a policy.Attributes) policy.Classification {
	return g.current().digest.Classify(a)
}

// Admission is an admitted request. Call Finish exactly once.
type Admission struct {
	Classification policy.Classification
	Wait           time.Duration // time spent queued
	req            *flowcontrol.Request
	gate           *Gate
	start          time.Time
	kind           string
}

// Estimate returns the request's work estimate (after any final-seat clamp).
func (a *Admission) Estimate() flowcontrol.WorkEstimate { return a.req.Estimate() }

// Finish runs fn as the request's execution and frees its seats afterwards,
// even if fn panics: at once, or after its final phase (AdditionalLatency)
// for a request with final seats.
func (a *Admission) Finish(fn func()) {
	pl, fs := a.Classification.PriorityLevel.Name, a.Classification.FlowSchema.Name
	defer func() {
		a.gate.metrics.executing(pl, fs, -1)
		a.gate.metrics.executed(pl, fs, a.kind, a.gate.clk.Now().Sub(a.start))
	}()
	a.req.Finish(fn)
}

// Admit classifies a, estimates its work as kube-apiserver does (lists and
// watches by the object counts of ObjectCounts, writes by the watches of
// Watches they notify, everything else one seat; capped per priority level)
// and waits for its priority level to dispatch it. wr describes the request
// to the estimator; nil means WorkRequest(a, nil), a request without list
// options. The wait is bounded as kube-apiserver bounds it: a quarter of
// ctx's deadline, or 15 s, and at most a minute. It returns the admission,
// or a *flowcontrol.RejectedError (queue-full, concurrency-limit, time-out).
// kind is "watch" for watches and "" otherwise (metrics only).
func (g *Gate) Admit(ctx context.Context, a policy.Attributes, wr *work.Request, kind string) (*Admission, error) {
	return g.AdmitWithin(ctx, a, wr, kind, 0, nil)
}

// AdmitWithin is Admit for a front end that bounds the wait itself and
// follows the request in its queue (the HTTP filter): waitLimit, when
// positive, is how long it may wait in its queue (else as Admit), and
// queued, when not nil, is told when it joins (true) and leaves (false) one.
func (g *Gate) AdmitWithin(ctx context.Context, a policy.Attributes, wr *work.Request, kind string, waitLimit time.Duration,
	queued func(inQueue bool)) (*Admission, error) {
	gen := g.current()
	c := gen.digest.Classify(a)
	pl, fs := c.PriorityLevel.Name, c.FlowSchema.Name
	if wr == nil {
		wr = WorkRequest(a, nil)
	}
	if isMutating(wr) {
		g.metrics.watchCountSample(pl, fs, g.watches.WatchCount(wr))
	}
	est := g.estimator.Estimate(wr, pl)
	g.metrics.estimated(pl, fs, est.MaxSeats())
	limitWait := gen.ctl.WithWaitLimit
	if waitLimit > 0 {
		limitWait = func(ctx context.Context) (context.Context, context.CancelFunc) {
			return gen.ctl.WaitAtMost(ctx, waitLimit)
		}
	}
	waitCtx, cancel := limitWait(ctx)
	defer cancel()
	arrive := g.clk.Now()
	var span trace.Span
	if tracing.Enabled() {
		_, span = tracing.Tracer().Start(ctx, "apf admission", trace.WithAttributes(
			attrFlowSchema.String(fs), attrPriorityLevel.String(pl), attrSeats.Int(est.MaxSeats())))
		defer span.End()
	}
	req, err := gen.ctl.StartRequest(waitCtx, est, c.Hash, fs, pl, c.Distinguisher, flowcontrol.Callbacks{Queued: queued,
		Released: func(seats int) { g.metrics.seats(pl, fs, -seats) }})
	wait := g.clk.Now().Sub(arrive)
	if span != nil {
		span.SetAttributes(attrQueueWait.Float64(wait.Seconds()))
	}
	if err != nil {
		g.metrics.rejected(pl, fs, err, wait)
		if span != nil {
			tracing.Fail(span, err)
		}
		return nil, err
	}
	g.metrics.dispatched(pl, fs, wait, c.PriorityLevel.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt)
	// Executing from dispatch, as kube counts them; the seats until they
	// are released, final seats included.
	g.metrics.executing(pl, fs, 1)
	g.metrics.seats(pl, fs, req.Estimate().MaxSeats())
	if kind == "" {
		kind = "regular"
	}
	return &Admission{Classification: c, Wait: wait, req: req, gate: g, start: g.clk.Now(), kind: kind}, nil
}

// Attributes of an admission's span.
const (
	attrFlowSchema    = attribute.Key("pace.apf.flow_schema")
	attrPriorityLevel = attribute.Key("pace.apf.priority_level")
	attrSeats         = attribute.Key("pace.apf.seats")
	attrQueueWait     = attribute.Key("pace.apf.queue_wait_seconds")
)

// Dump returns the engine's per-level state.
func (g *Gate) Dump() []flowcontrol.LevelDump { return g.current().ctl.Dump() }

// UID returns the UID of an object, or a stable one derived from its kind and
// name when it has none (objects read from files).
func UID(kind, name, uid string) string {
	if uid != "" {
		return uid
	}
	key := kind + "/" + name
	if v, ok := derivedUIDs.Load(key); ok {
		return v.(string)
	}
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:16])
	v, _ := derivedUIDs.LoadOrStore(key, h[0:8]+"-"+h[8:12]+"-"+h[12:16]+"-"+h[16:20]+"-"+h[20:32])
	return v.(string)
}

// derivedUIDs memoizes UID's derivations: every admission answers with two,
// and the policy names few objects.
var derivedUIDs sync.Map
