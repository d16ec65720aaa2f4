package work

import (
	"errors"
	"time"
)

// Request describes what the estimator needs to know about one API request.
// Field names follow Kubernetes' RequestInfo and ListOptions.
type Request struct {
	Verb        string // get, list, watch, create, update, patch, delete, ...
	APIGroup    string // "" is the core group
	Resource    string
	Subresource string
	Namespace   string
	Name        string // set when one named object is addressed

	// List options (lists and watches only).
	Limit                int64
	ResourceVersion      string
	ResourceVersionMatch string // "", "Exact" or "NotOlderThan"
	Continue             string
	LabelSelector        string
	FieldSelector        string
	SendInitialEvents    *bool
	// InvalidListOptions marks list options that do not parse (e.g. a
	// non-numeric limit): the request will fail validation, and kube charges
	// it the maximum.
	InvalidListOptions bool
}

// Stats describes the stored objects of one resource.
type Stats struct {
	ObjectCount            int64
	AverageObjectSizeBytes int64
}

// Errors an ObjectCounter returns.
var (
	// ErrObjectCountNotFound means the resource is unknown (for example an
	// aggregated one); the request is charged the minimum.
	ErrObjectCountNotFound = errors.New("object count not found")
	// ErrObjectCountStale means the count is too old to trust; the request is
	// charged as if the resource were huge.
	ErrObjectCountStale = errors.New("object count stale")
)

// ObjectCounter supplies object statistics per group and resource.
type ObjectCounter interface {
	ObjectStats(group, resource string) (Stats, error)
}

// WatchCounter supplies the number of watches a mutating request will notify.
type WatchCounter interface {
	WatchCount(r *Request) int
}

// Sizes used by the list formulas (reference §5.2).
const (
	bytesPerSeat                = 100_000
	cacheMaxBytes               = 1_000_000
	unknownObjectSizeBytes      = 1_500_000
	staleObjectCount            = 1_000_000_000
	defaultEventAdditionalDelay = 5 * time.Millisecond
)

// EstimatorConfig holds the estimator's constants. Use DefaultEstimatorConfig.
type EstimatorConfig struct {
	MinimumSeats              int           `json:"minimumSeats"`
	MaximumListSeatsLimit     int           `json:"maximumListSeatsLimit"`
	MaximumMutatingSeatsLimit int           `json:"maximumMutatingSeatsLimit"`
	ObjectsPerSeat            float64       `json:"objectsPerSeat"`
	WatchesPerSeat            float64       `json:"watchesPerSeat"`
	EventAdditionalDuration   time.Duration `json:"eventAdditionalDuration"`
	// MutatingEnabled charges writes for their watch notifications.
	MutatingEnabled bool `json:"mutatingEnabled"`
	// SizeBased selects the size formula for lists (kube's
	// SizeBasedListCostEstimate gate); false selects the count formula.
	SizeBased bool `json:"sizeBased"`
	// WatchList charges watches like lists (kube's WatchList gate).
	WatchList bool `json:"watchList"`
	// ConsistentReadFromCache says a list with no resourceVersion is served
	// from the watch cache (kube's ConsistentListFromCache, when etcd
	// supports watch progress requests: 3.4.31, 3.5.13 and later).
	ConsistentReadFromCache bool `json:"consistentReadFromCache"`
}

// DefaultEstimatorConfig returns kube-apiserver v1.37's defaults.
func DefaultEstimatorConfig() EstimatorConfig {
	return EstimatorConfig{
		MinimumSeats:              1,
		MaximumListSeatsLimit:     100,
		MaximumMutatingSeatsLimit: 10,
		ObjectsPerSeat:            100,
		WatchesPerSeat:            10,
		EventAdditionalDuration:   defaultEventAdditionalDelay,
		MutatingEnabled:           true,
		SizeBased:                 true,
		WatchList:                 true,
		ConsistentReadFromCache:   true,
	}
}

// Estimator turns requests into work estimates. It is safe for concurrent use
// if its counters are.
type Estimator struct {
	cfg      EstimatorConfig
	objects  ObjectCounter
	watches  WatchCounter
	maxSeats func(priorityLevel string) int
}

// NewEstimator returns an estimator. maxSeats gives the per-priority-level cap
// (0 means none); it may be nil.
func NewEstimator(cfg EstimatorConfig, objects ObjectCounter, watches WatchCounter, maxSeats func(priorityLevel string) int) *Estimator {
	if maxSeats == nil {
		maxSeats = func(string) int { return 0 }
	}
	return &Estimator{cfg: cfg, objects: objects, watches: watches, maxSeats: maxSeats}
}

// Estimate returns the work estimate of r at the given priority level. A nil r
// (a request whose attributes are unknown) is charged the level's maximum.
func (e *Estimator) Estimate(r *Request, priorityLevel string) Estimate {
	if r == nil {
		return Estimate{InitialSeats: e.capFor(priorityLevel, max(e.cfg.MaximumListSeatsLimit, e.cfg.MaximumMutatingSeatsLimit))}
	}
	switch r.Verb {
	case "list":
		return e.list(r, priorityLevel)
	case "watch":
		if e.cfg.WatchList {
			return e.list(r, priorityLevel)
		}
	case "create", "update", "patch", "delete":
		return e.mutating(r, priorityLevel)
	}
	return Estimate{InitialSeats: e.cfg.MinimumSeats}
}

// capFor returns the level's max seats, or limit when the level has none or
// a larger one.
func (e *Estimator) capFor(priorityLevel string, limit int) int {
	if m := e.maxSeats(priorityLevel); m > 0 && m <= limit {
		return m
	}
	return limit
}
