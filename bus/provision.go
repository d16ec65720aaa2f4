package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// Limits are the retention settings of the provisioned streams.
type Limits struct {
	// MetricsMaxAge, AdmissionMaxAge and LogsMaxAge bound how long samples,
	// APF events and log lines are kept. Zero means 7 days, 1 day, 7 days.
	MetricsMaxAge   time.Duration `json:"metrics_max_age,omitempty"`
	AdmissionMaxAge time.Duration `json:"admission_max_age,omitempty"`
	LogsMaxAge      time.Duration `json:"logs_max_age,omitempty"`
	// MetricsMaxBytes bounds the metrics stream's size, the oldest samples
	// going first; zero means its default in StreamMaxBytes.
	MetricsMaxBytes int64 `json:"metrics_max_bytes,omitempty"`
	// StoreBytes is the JetStream store the streams share: each stream's
	// default bound is a fixed share of it (streamShares, 83.5 % in all).
	// Zero means 600 MiB, whose shares add up to about 500 MiB.
	StoreBytes int64 `json:"store_bytes,omitempty"`
	// StreamMaxBytes bounds streams' sizes by family ("DECISIONS", "WORK",
	// …: the stream name without the prefix); a family not listed gets its
	// default (listed in docs/bus.md), a negative value no bound but the
	// server's store. A full stream discards its oldest messages, but for
	// the work, results, dead-letter and request streams, which refuse new
	// ones: the publisher gets an error rather than losing an item.
	StreamMaxBytes map[string]int64 `json:"stream_max_bytes,omitempty"`
	// Replicas is the replication factor of streams and buckets, 1 to 5.
	// Zero means auto: 3 when the JetStream cluster can place three
	// replicas, else 1; auto never lowers an existing object's replicas
	// (an explicit value does, by a stream update).
	Replicas int `json:"replicas,omitempty"`
	// LeaseTTL is how long a stage leader's lease lives without renewal
	// (the leases bucket's TTL); zero means 10s.
	LeaseTTL time.Duration `json:"lease_ttl,omitempty"`
	// QueuedItemsPerJob bounds the items one job holds in the work stream
	// (queued or running): the server refuses a push beyond it to its
	// publisher, so that one job cannot fill the stream every job shares.
	// Zero means 1,000,000 (the manager's largest submission); negative,
	// no bound.
	QueuedItemsPerJob int64 `json:"queued_items_per_job,omitempty"`
	// QueuedBytesPerUser, when positive, gives each user's jobs a work
	// stream of their own bounded to that many bytes, which the server
	// reserves in its store: no user can fill another's (see
	// workstreams.go). Zero means one work stream for every job.
	QueuedBytesPerUser int64 `json:"queued_bytes_per_user,omitempty"`
}

// defaultStoreBytes is the store the default bounds are shares of when
// Limits.StoreBytes is zero: 500 MiB of bounds, within the smallest store
// Pace runs on (its tests' servers, 1 GiB; scaling a bus from one replica to
// three needs the headroom).
const defaultStoreBytes = 600 << 20

// streamShares are the streams' default size bounds, by family, in
// thousandths of Limits.StoreBytes. JetStream reserves a bounded stream's
// bytes in the store of each server holding it when the stream is created
// or scaled, so together they stay under the store (83.5 %), leaving room for
// the buckets and the dead-letter object store.
var streamShares = map[schemas.Stream]int64{
	jobsFamily:       30,  // discard old: lifecycle events, ~300 B each
	workFamily:       250, // discard new: queued items
	resultsFamily:    150, // discard new: one result per item until the job is cleaned
	ledgerFamily:     40,  // discard new: one ~100 B entry per queued item of a streaming job
	deadFamily:       30,  // discard new: dead-lettered items
	metricsFamily:    180, // discard old: samples and progress
	decisionsFamily:  30,  // discard old: ~600 B each, on change or per 30 s heartbeat
	kubeFamily:       10,  // discard new: requests awaiting the gate
	outcomesFamily:   10,  // discard old
	admissionFamily:  25,  // discard old
	logsFamily:       80,  // discard old
	advisoriesFamily: 5,   // discard old, as before: a work queue of the server's advisories
}

// bucketShares are the default size bounds of the key-value buckets and
// the dead-letter object store Provision makes, in thousandths of
// Limits.StoreBytes (7.8 % in all; 91.3 % with the streams'). A full bucket
// refuses new values: a job record, a failure note, a presence key.
var bucketShares = map[schemas.Bucket]int64{
	jobsBucket:                40, // job records, 16 revisions each
	failuresBucket:            10, // last error of items being retried
	workersBucket:             5,  // presence of running workers
	schemas.BucketFlowControl: 2,  // the live APF configuration
	leasesBucket:              1,  // stage leader leases
	lettersBucket:             20, // bodies of malformed messages too large for their letters
}

// bucketBytes is the size bound of a bucket or object store Provision makes.
func (l Limits) bucketBytes(bucket schemas.Bucket) int64 {
	store := l.StoreBytes
	if store <= 0 {
		store = defaultStoreBytes
	}
	return store / 1000 * bucketShares[bucket]
}

// maxBytes is the size bound of a family's stream; -1 means none.
func (l Limits) maxBytes(family schemas.Stream) int64 {
	n, ok := l.StreamMaxBytes[string(family)]
	if !ok {
		store := l.StoreBytes
		if store <= 0 {
			store = defaultStoreBytes
		}
		n = store / 1000 * streamShares[family]
		if family == metricsFamily && l.MetricsMaxBytes > 0 {
			n = l.MetricsMaxBytes
		}
	}
	if n <= 0 {
		return -1
	}
	return n
}

func (l Limits) withDefaults() Limits {
	const day = 24 * time.Hour
	if l.MetricsMaxAge == 0 {
		l.MetricsMaxAge = 7 * day
	}
	if l.AdmissionMaxAge == 0 {
		l.AdmissionMaxAge = day
	}
	if l.LogsMaxAge == 0 {
		l.LogsMaxAge = 7 * day
	}
	if l.LeaseTTL == 0 {
		l.LeaseTTL = 10 * time.Second
	}
	if l.QueuedItemsPerJob == 0 {
		l.QueuedItemsPerJob = 1_000_000
	}
	return l
}

// DefaultUserBytes is the usual Limits.QueuedBytesPerUser: a sixteenth of
// the work stream's share of the store, so that fifteen users and the jobs
// of none fit in it.
func (l Limits) DefaultUserBytes() int64 {
	store := l.StoreBytes
	if store <= 0 {
		store = defaultStoreBytes
	}
	return store / 1000 * streamShares[workFamily] / 16
}

// LogLinesPerJob is how many of its newest log lines a job keeps: the logs
// stream holds at most that many messages per subject.
const LogLinesPerJob = 10_000

// Shorter names of the streams and buckets the bus package uses most.
const (
	jobsFamily       = schemas.StreamJobs
	workFamily       = schemas.StreamWork
	resultsFamily    = schemas.StreamResults
	ledgerFamily     = schemas.StreamLedger
	deadFamily       = schemas.StreamDead
	metricsFamily    = schemas.StreamMetrics
	decisionsFamily  = schemas.StreamDecisions
	kubeFamily       = schemas.StreamKube
	outcomesFamily   = schemas.StreamOutcomes
	admissionFamily  = schemas.StreamAdmission
	logsFamily       = schemas.StreamLogs
	advisoriesFamily = schemas.StreamAdvisories

	jobsBucket     = schemas.BucketJobs
	failuresBucket = schemas.BucketFailures
	leasesBucket   = schemas.BucketLeases

	deadLetterConsumer = "dead-letter"
	// maxDeliveriesAdvisories starts the subject of the server's advisory
	// about a message past its consumer's max deliveries; the stream's name
	// and the consumer's follow.
	maxDeliveriesAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."
)

// streams returns the desired configuration of every stream Pace uses.
func (c *Client) streams(l Limits) []jetstream.StreamConfig {
	p := string(c.prefix)
	s := func(family schemas.Stream, desc string, subjects ...string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name: c.prefix.Stream(family), Description: desc, Subjects: subjects,
			Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
			Replicas: l.Replicas, Discard: jetstream.DiscardOld, MaxBytes: l.maxBytes(family),
		}
	}
	jobs := s(jobsFamily, "job lifecycle events", p+".jobs.*.*")
	work := s(workFamily, "work items: the main and processing queues", p+".work.*")
	// Interest, not work-queue, retention: an item stays until its job's
	// consumer and the manager's ledger consumer have both acknowledged it,
	// so the manager sees every item ever queued (see KeepLedger).
	work.Retention, work.Discard = jetstream.InterestPolicy, jetstream.DiscardNew
	if l.QueuedItemsPerJob > 0 { // a job's subject full: its pushes are refused, others' not
		work.MaxMsgsPerSubject, work.DiscardNewPerSubject = l.QueuedItemsPerJob, true
	}
	if l.QueuedBytesPerUser > 0 { // the stream of jobs with no owner; users' streams copy it
		work.Subjects, work.MaxBytes = nil, l.QueuedBytesPerUser
		work.Metadata = map[string]string{userBytesKey: strconv.FormatInt(l.QueuedBytesPerUser, 10)}
	}
	results := s(resultsFamily, "exactly one result per item", p+".results.*.*")
	// One message per subject, a second refused by the server itself: one
	// result per item holds for every client, not only for Pace's SDK.
	results.Discard, results.MaxMsgsPerSubject, results.DiscardNewPerSubject = jetstream.DiscardNew, 1, true
	ledger := s(ledgerFamily, "items queued to streaming jobs, one entry each", p+".ledger.*.*")
	ledger.Discard, ledger.MaxMsgsPerSubject = jetstream.DiscardNew, 1
	dead := s(deadFamily, "dead-lettered items", p+".dead.*")
	dead.Discard = jetstream.DiscardNew
	metrics := s(metricsFamily, "raw samples and progress", p+".metrics.*.*")
	metrics.MaxAge = l.MetricsMaxAge
	metrics.AllowMsgTTL = true // raw samples expire long before progress (Nats-TTL)
	decisions := s(decisionsFamily, "scaling decisions", p+".decisions.*")
	decisions.MaxAge = l.MetricsMaxAge
	kube := s(kubeFamily, "infrastructure requests awaiting the APF gate", c.prefix.KubeRequests())
	kube.Retention, kube.Discard = jetstream.WorkQueuePolicy, jetstream.DiscardNew
	outcomes := s(outcomesFamily, "infrastructure request outcomes", c.prefix.KubeOutcomes())
	outcomes.MaxAge = l.MetricsMaxAge
	admission := s(admissionFamily, "APF dispatch and reject events", p+".admission.*.*")
	admission.MaxAge = l.AdmissionMaxAge
	logs := s(logsFamily, "job log lines", p+".logs.*")
	logs.MaxAge = l.LogsMaxAge
	logs.MaxMsgsPerSubject = LogLinesPerJob // a chatty job loses its oldest lines, not others' lines
	adv := s(advisoriesFamily, "max-deliveries advisories of the work streams, for dead-lettering",
		c.advisories(c.prefix.Stream(workFamily)))
	adv.Retention = jetstream.WorkQueuePolicy
	// The ledger before the work stream: moving an old work stream enters
	// results in it.
	return []jetstream.StreamConfig{jobs, ledger, work, results, dead, metrics, decisions, kube, outcomes, admission, logs, adv}
}

// Provision creates or updates every stream, key-value bucket, object store
// and static consumer Pace uses. It is idempotent; when an existing object's
// configuration differs from Pace's it is corrected and the change logged.
//
// Replicas are resolved once (see Limits.Replicas) and logged. A stream or
// bucket whose replicas differ is scaled by a stream update, which
// JetStream performs online; its consumers follow it.
func (c *Client) Provision(ctx context.Context, l Limits) error {
	l = l.withDefaults()
	auto := l.Replicas == 0
	streams := c.streams(l)
	buckets := c.buckets(l)
	objects := c.objectStores(l)
	have := make(map[string]*jetstream.StreamConfig, len(streams)+len(buckets)+len(objects))
	for _, name := range slices.Concat(streamNames(streams), bucketStreams(buckets), objectStoreStreams(objects)) {
		cfg, err := c.existing(ctx, name)
		if err != nil {
			return fmt.Errorf("provision %s: %w", name, err)
		}
		have[name] = cfg
	}
	replicas, err := c.replicas(ctx, l.Replicas, have)
	if err != nil {
		return err
	}
	for _, cfg := range streams {
		cfg.Replicas = keepReplicas(auto, replicas, have[cfg.Name])
		if cfg.Name == c.prefix.Stream(workFamily) && l.QueuedBytesPerUser > 0 {
			if cfg.Subjects, err = c.userWorkSubjects(ctx, have[cfg.Name]); err != nil {
				return fmt.Errorf("provision stream %s: %w", cfg.Name, err)
			}
		}
		if cfg.Name == c.prefix.Stream(advisoriesFamily) && have[cfg.Name] != nil {
			cfg.Subjects = c.advisorySubjects(have[cfg.Name].Subjects)
		}
		if cfg.Name == c.prefix.Stream(workFamily) {
			migrated, err := c.migrateWork(ctx, cfg, have[cfg.Name])
			if err != nil {
				return fmt.Errorf("provision stream %s: %w", cfg.Name, err)
			}
			if migrated {
				continue
			}
		}
		if err := c.ensureStream(ctx, cfg, have[cfg.Name]); err != nil {
			return err
		}
	}
	for _, cfg := range buckets {
		old := have["KV_"+cfg.Bucket]
		cfg.Replicas = keepReplicas(auto, replicas, old)
		if err := c.ensureBucket(ctx, cfg, old); err != nil {
			return err
		}
	}
	for _, cfg := range objects {
		old := have["OBJ_"+cfg.Bucket]
		cfg.Replicas = keepReplicas(auto, replicas, old)
		if err := c.ensureObjectStore(ctx, cfg, old); err != nil {
			return err
		}
	}
	if err := c.ensureLedgerConsumer(ctx, c.prefix.Stream(workFamily)); err != nil {
		return err
	}
	return c.ensureDeadLetterConsumer(ctx)
}

// buckets returns the desired configuration of every key-value bucket;
// Replicas is set by Provision.
func (c *Client) buckets(l Limits) []jetstream.KeyValueConfig {
	return []jetstream.KeyValueConfig{
		{Bucket: c.prefix.Bucket(jobsBucket), Description: "current job records", History: 16,
			Storage: jetstream.FileStorage, MaxBytes: l.bucketBytes(jobsBucket)},
		{Bucket: c.prefix.Bucket(failuresBucket), Description: "last error of items being retried",
			TTL: 7 * 24 * time.Hour, Storage: jetstream.FileStorage, MaxBytes: l.bucketBytes(failuresBucket)},
		{Bucket: c.prefix.Bucket(workersBucket), Description: "running workers per job",
			TTL: time.Hour, Storage: jetstream.FileStorage, MaxBytes: l.bucketBytes(workersBucket)},
		{Bucket: c.prefix.Bucket(schemas.BucketFlowControl), Description: "live APF FlowSchemas and priority levels", History: 8,
			Storage: jetstream.FileStorage, MaxBytes: l.bucketBytes("flowcontrol")},
		{Bucket: c.prefix.Bucket(leasesBucket), Description: "stage leader leases", TTL: l.LeaseTTL,
			Storage: jetstream.FileStorage, MaxBytes: l.bucketBytes(leasesBucket)},
	}
}

func streamNames(cfgs []jetstream.StreamConfig) []string {
	names := make([]string, len(cfgs))
	for i, cfg := range cfgs {
		names[i] = cfg.Name
	}
	return names
}

func bucketStreams(cfgs []jetstream.KeyValueConfig) []string {
	names := make([]string, len(cfgs))
	for i, cfg := range cfgs {
		names[i] = "KV_" + cfg.Bucket
	}
	return names
}

// ensureStream creates the stream or corrects its drift; a stream already
// as desired is left alone, so that a client without the right to create
// or update streams can run Provision once the bus is provisioned.
func (c *Client) ensureStream(ctx context.Context, cfg jetstream.StreamConfig, old *jetstream.StreamConfig) error {
	if covers(old, &cfg) {
		return nil
	}
	var st jetstream.Stream
	err := c.attempt(ctx, "provision stream "+cfg.Name, func(ctx context.Context) (err error) {
		st, err = c.js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("provision stream %s: %w", cfg.Name, err)
	}
	c.logDrift("stream", cfg.Name, old, &st.CachedInfo().Config)
	return nil
}

// ensureBucket is ensureStream for a key-value bucket.
func (c *Client) ensureBucket(ctx context.Context, cfg jetstream.KeyValueConfig, old *jetstream.StreamConfig) error {
	history := int64(max(cfg.History, 1))
	if covers(old, &jetstream.StreamConfig{Description: cfg.Description, MaxMsgsPerSubject: history,
		MaxAge: cfg.TTL, MaxBytes: cfg.MaxBytes, Storage: cfg.Storage, Replicas: cfg.Replicas, Discard: jetstream.DiscardNew}) {
		return nil
	}
	if _, err := c.js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
		return fmt.Errorf("provision bucket %s: %w", cfg.Bucket, err)
	}
	after, err := c.js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return fmt.Errorf("provision bucket %s: %w", cfg.Bucket, err)
	}
	c.logDrift("bucket", cfg.Bucket, old, &after.CachedInfo().Config)
	return nil
}

func (c *Client) ensureDeadLetterConsumer(ctx context.Context) error {
	// Filtered on the advisories' subject: a message a consumer delivered
	// into the stream keeps its own subject (a tenant's push consumer can
	// deliver anywhere), and must not be taken for an advisory.
	return c.ensureConsumer(ctx, c.prefix.Stream(advisoriesFamily), jetstream.ConsumerConfig{
		Durable: deadLetterConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		Description:   "moves items past their max deliveries to the dead-letter subject",
		FilterSubject: c.advisories("*"),
	})
}

// ensureConsumer creates or corrects a static durable consumer of stream.
func (c *Client) ensureConsumer(ctx context.Context, stream string, want jetstream.ConsumerConfig) error {
	// Looked up like any call of provisioning: while a stream just scaled
	// elects its leader a lookup can go unanswered, and an update sent then
	// for nothing could wait as long.
	var cons jetstream.Consumer
	err := c.attempt(ctx, "look up consumer "+want.Durable, func(ctx context.Context) (err error) {
		cons, err = c.js.Consumer(ctx, stream, want.Durable)
		return err
	})
	if err == nil {
		got := cons.CachedInfo().Config
		if got.AckPolicy == want.AckPolicy && got.AckWait == want.AckWait && got.Description == want.Description &&
			got.FilterSubject == want.FilterSubject && (want.MaxAckPending == 0 || got.MaxAckPending == want.MaxAckPending) {
			return nil
		}
	}
	err = c.attempt(ctx, "provision consumer "+want.Durable, func(ctx context.Context) error {
		_, err := c.js.CreateOrUpdateConsumer(ctx, stream, want)
		return err
	})
	if err != nil {
		return fmt.Errorf("provision consumer %s: %w", want.Durable, err)
	}
	return nil
}

// apiAttempt bounds one JetStream API call of provisioning.
const apiAttempt = 15 * time.Second

// attempt runs call with a context bounded by apiAttempt, again a second
// later while its request goes unanswered and ctx lasts: a request the
// cluster loses while a stream it has just scaled elects its leader is
// asked again, not waited for until ctx ends (a provisioning waited 3
// minutes so). An answer, even an error, is returned as it is.
func (c *Client) attempt(ctx context.Context, what string, call func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, apiAttempt)
		err := call(actx)
		cancel()
		unanswered := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
			errors.Is(err, nats.ErrNoResponders)
		if !unanswered || ctx.Err() != nil {
			return err
		}
		c.log.Warn(what+": no answer, asking again", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// covers reports whether an existing stream's configuration has every
// setting that want sets. Settings want leaves at their zero value are the
// server's defaults, which the server fills in, so they are not compared;
// enumerations (retention, discard, storage) are, their zero being a value.
// Of a map (the metadata), only the keys want sets are compared: the server
// adds its own.
func covers(have, want *jetstream.StreamConfig) bool {
	if have == nil {
		return false
	}
	var mh, mw map[string]any
	jh, _ := json.Marshal(have)
	jw, _ := json.Marshal(want)
	_ = json.Unmarshal(jh, &mh)
	_ = json.Unmarshal(jw, &mw)
	for k, v := range mw {
		if v == nil || reflect.ValueOf(v).IsZero() {
			continue
		}
		if m, ok := v.(map[string]any); ok {
			hm, _ := mh[k].(map[string]any)
			for mk, mv := range m {
				if !reflect.DeepEqual(hm[mk], mv) {
					return false
				}
			}
			continue
		}
		if !reflect.DeepEqual(mh[k], v) {
			return false
		}
	}
	return true
}

// existing returns the configuration of stream name, or nil when it does
// not exist.
func (c *Client) existing(ctx context.Context, name string) (*jetstream.StreamConfig, error) {
	st, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &st.CachedInfo().Config, nil
}

// logDrift logs which settings of an existing object Provision changed.
func (c *Client) logDrift(kind, name string, before, after *jetstream.StreamConfig) {
	if before == nil {
		c.log.Info("provisioned", "kind", kind, "name", name)
		return
	}
	if changed := changedFields(before, after); len(changed) > 0 {
		c.log.Warn("corrected config drift", "kind", kind, "name", name, "fields", changed)
	}
}

// changedFields lists the JSON fields whose values differ between a and b.
func changedFields(a, b any) []string {
	var ma, mb map[string]any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	var out []string
	for k, v := range mb {
		if !reflect.DeepEqual(ma[k], v) {
			out = append(out, k)
		}
	}
	for k := range ma {
		if _, ok := mb[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
