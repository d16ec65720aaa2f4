package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// DefaultPrefix is the subject prefix used unless configured otherwise.
const DefaultPrefix Prefix = "pace"

// Prefix is the first subject token of a Pace installation. Several
// installations can share one NATS account by using different prefixes;
// stream and bucket names derive from it too.
//
// Subjects (with the default prefix):
//
//	pace.submit                          request/reply: submit a job
//	pace.jobs.<job>.<event>              job lifecycle events
//	pace.work.<job>                      work items (the "main" queue)
//	pace.results.<job>.<item>            exactly one result per item
//	pace.ledger.<job>.<item>             items a streaming job was queued (the manager's)
//	pace.dead.<job>                      dead letters
//	pace.metrics.<job>.<kind>            raw samples and processed progress
//	pace.decisions.<job>                 scaling decisions
//	pace.k8s.requests, pace.k8s.outcomes infrastructure requests and outcomes
//	pace.admission.<level>.<schema>      APF dispatch and reject events
//	pace.logs.<job>                      per-job log lines
//	pace.control.<action>                request/reply: stop or terminate a job
//	pace.flowcontrol.dump                request/reply: APF state of every gate and manager
type Prefix string

// Valid reports whether p is a usable prefix (one subject token).
func (p Prefix) Valid() bool { return ValidToken(string(p)) }

func (p Prefix) join(tokens ...string) string {
	return string(p) + "." + strings.Join(tokens, ".")
}

// Submit is the request/reply subject for job submission.
func (p Prefix) Submit() string { return p.join("submit") }

// FlowControlDump is the request/reply subject on which every process
// holding APF state (the gate's leader, each manager replica) answers with
// it; the request's body is ignored.
func (p Prefix) FlowControlDump() string { return p.join("flowcontrol", "dump") }

// Jobs is the subject of a job's lifecycle event.
func (p Prefix) Jobs(job string, event JobEventType) string {
	return p.join("jobs", job, string(event))
}

// Work is the subject a job's work items are published to.
func (p Prefix) Work(job string) string { return p.join("work", job) }

// Results is the subject of one item's result.
func (p Prefix) Results(job, item string) string { return p.join("results", job, item) }

// JobResults is the wildcard subject of every result of a job.
func (p Prefix) JobResults(job string) string { return p.join("results", job, "*") }

// Ledger is the subject recording that a streaming job's item was queued.
func (p Prefix) Ledger(job, item string) string { return p.join("ledger", job, item) }

// JobLedger is the wildcard subject of a job's ledger.
func (p Prefix) JobLedger(job string) string { return p.join("ledger", job, "*") }

// Dead is the subject of a job's dead letters.
func (p Prefix) Dead(job string) string { return p.join("dead", job) }

// Metrics is the subject of a job's metrics of one kind.
func (p Prefix) Metrics(job string, kind MetricKind) string {
	return p.join("metrics", job, string(kind))
}

// Decisions is the subject of a job's scaling decisions.
func (p Prefix) Decisions(job string) string { return p.join("decisions", job) }

// KubeRequests is the subject of infrastructure requests awaiting the APF gate.
func (p Prefix) KubeRequests() string { return p.join("k8s", "requests") }

// KubeOutcomes is the subject of executed infrastructure requests.
func (p Prefix) KubeOutcomes() string { return p.join("k8s", "outcomes") }

// Admission is the subject of APF events of one priority level and flow schema.
func (p Prefix) Admission(level, schema string) string { return p.join("admission", level, schema) }

// Logs is the subject of a job's log lines.
func (p Prefix) Logs(job string) string { return p.join("logs", job) }

// jobFamilies are the subject families (the token after the prefix)
// whose next token is a job.
var jobFamilies = []string{"jobs", "work", "results", "ledger", "dead", "metrics", "decisions", "logs"}

// SubjectJob is the job a subject of p names, such as <job> in
// pace.work.<job>, or "unknown" when it names none (pace.k8s.requests,
// another prefix's subjects).
func (p Prefix) SubjectJob(subject string) string {
	tokens := strings.Split(subject, ".")
	if len(tokens) > 2 && tokens[0] == string(p) && slices.Contains(jobFamilies, tokens[1]) && ValidToken(tokens[2]) {
		return tokens[2]
	}
	return "unknown"
}

// Stream is a family of subjects kept in one of Pace's streams; Prefix.Stream
// names the stream.
type Stream string

// Pace's streams.
const (
	StreamJobs       Stream = "JOBS"         // pace.jobs.<job>.<event>
	StreamWork       Stream = "WORK"         // pace.work.<job>
	StreamResults    Stream = "RESULTS"      // pace.results.<job>.<item>
	StreamLedger     Stream = "LEDGER"       // pace.ledger.<job>.<item>
	StreamDead       Stream = "DEAD"         // pace.dead.<job>
	StreamMetrics    Stream = "METRICS"      // pace.metrics.<job>.<kind>
	StreamDecisions  Stream = "DECISIONS"    // pace.decisions.<job>
	StreamKube       Stream = "K8S"          // pace.k8s.requests
	StreamOutcomes   Stream = "K8S_OUTCOMES" // pace.k8s.outcomes
	StreamAdmission  Stream = "ADMISSION"    // pace.admission.<level>.<schema>
	StreamLogs       Stream = "LOGS"         // pace.logs.<job>
	StreamAdvisories Stream = "ADVISORIES"   // the server's max-deliveries advisories
	StreamProbe      Stream = "PROBE"        // Provision's placement probe, deleted at once
)

// Bucket is one of Pace's key-value or object buckets; Prefix.Bucket names it.
type Bucket string

// Pace's buckets.
const (
	BucketJobs        Bucket = "jobs"         // current job records
	BucketFailures    Bucket = "failures"     // last error of items being retried
	BucketWorkers     Bucket = "workers"      // running workers per job
	BucketLeases      Bucket = "leases"       // stage leader leases
	BucketFlowControl Bucket = "flowcontrol"  // the live APF configuration: flowschemas.NAME, prioritylevels.NAME as JSON
	BucketController  Bucket = "controller"   // controllers' saved state (the default name)
	BucketDeadLetters Bucket = "dead_letters" // bodies too large for their dead letter (an object store)
	BucketPlugins     Bucket = "plugins"      // registered external controllers
	BucketClusters    Bucket = "clusters"     // registered Kubernetes clusters (kubeconfigs)
	BucketItemTimes   Bucket = "item_times"   // item times of finished jobs per worker program, for predictions
)

// Stream returns the name of the stream holding s, e.g.
// Stream(StreamWork) = "PACE_WORK".
func (p Prefix) Stream(s Stream) string { return strings.ToUpper(string(p)) + "_" + string(s) }

// userWorkPrefix starts the name of each user's work stream, after the
// prefix; 16 hexadecimal digits follow.
const userWorkPrefix = "_WORK_U"

// UserWorkStream returns the name of the work stream of owner's jobs when
// each user has one: "PACE_WORK_U" and the first 16 hexadecimal digits of
// the SHA-256 of owner, e.g. "PACE_WORK_U2bd806c97f0e00af".
func (p Prefix) UserWorkStream(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return strings.ToUpper(string(p)) + userWorkPrefix + hex.EncodeToString(sum[:8])
}

// IsUserWorkStream reports whether name is a user's work stream.
func (p Prefix) IsUserWorkStream(name string) bool {
	rest, ok := strings.CutPrefix(name, strings.ToUpper(string(p))+userWorkPrefix)
	if !ok || len(rest) != 16 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// Bucket returns the name of a bucket, e.g. Bucket(BucketJobs) = "pace_jobs".
func (p Prefix) Bucket(b Bucket) string { return string(p) + "_" + string(b) }

// workConsumerPrefix starts the name of each job's consumer of the work
// stream.
const workConsumerPrefix = "work-"

// WorkConsumer is the name of job's durable consumer of the work stream,
// from which its workers pull its items: "work-<job>".
func WorkConsumer(job string) string { return workConsumerPrefix + job }

// WorkConsumerJob is the job of a work consumer named name, and false for a
// consumer of the work stream that is no job's (the ledger, a count).
func WorkConsumerJob(name string) (string, bool) { return strings.CutPrefix(name, workConsumerPrefix) }
