package bus

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
)

// JobStream is a stream whose subjects hold a job's id: what a job's owner
// may read of it.
type JobStream struct {
	// Family is the stream's name without the prefix (RESULTS).
	Family schemas.Stream
	// Subject is the subjects of job in the stream; "*" for every job.
	Subject func(p schemas.Prefix, job string) string
}

// JobStreams are the streams a job's owner reads: its results, dead letters,
// logs, lifecycle events, decisions and progress.
var JobStreams = []JobStream{
	{resultsFamily, func(p schemas.Prefix, job string) string { return p.Results(job, ">") }},
	{deadFamily, func(p schemas.Prefix, job string) string { return p.Dead(job) }},
	{logsFamily, func(p schemas.Prefix, job string) string { return p.Logs(job) }},
	{jobsFamily, func(p schemas.Prefix, job string) string { return p.Jobs(job, schemas.JobEventType(">")) }},
	{decisionsFamily, func(p schemas.Prefix, job string) string { return p.Decisions(job) }},
	{metricsFamily, func(p schemas.Prefix, job string) string { return p.Metrics(job, schemas.ProgressMetrics) }},
	// Metrics' dead letters (pace.metrics.<job>.dead), read with Letters.
	{metricsFamily, func(p schemas.Prefix, job string) string { return p.Metrics(job, schemas.DeadMetrics) }},
}

// ReaderIdle is how long a reader's consumer lives without being read.
const ReaderIdle = time.Minute

// ReadRequest asks the manager (on pace.control.read) for a consumer that
// reads one job's messages of a stream. Tenants cannot create consumers
// themselves: a consumer's deliver subject, which permissions cannot see,
// would let them have the server copy their messages into any stream.
type ReadRequest struct {
	// Stream is the stream's name: PACE_RESULTS.
	Stream string `json:"stream"`
	// FilterSubject is within one job's subjects of Stream (see JobStreams);
	// an admin's may span jobs, or read PACE_ADMISSION.
	FilterSubject string `json:"filter_subject"`
	// DeliverPolicy is all (the default), last, last_per_subject, new or
	// by_start_sequence (from OptStartSeq).
	DeliverPolicy string `json:"deliver_policy,omitempty"`
	OptStartSeq   uint64 `json:"opt_start_seq,omitempty"`
}

// ReadReply names the consumer made for a ReadRequest: a pull consumer
// without acknowledgements, deleted after ReaderIdle without a fetch. Its
// asker fetches from it, reads its info and deletes it through the
// JetStream API prefix APIPrefix (see ReaderAPIPrefix), not $JS.API.
type ReadReply struct {
	Stream    string `json:"stream"`
	Consumer  string `json:"consumer"`
	APIPrefix string `json:"api_prefix"`
}

// ReaderAPIPrefix is the JetStream API prefix through which the caller
// whose CallerID is caller reads the consumers the manager makes for it:
// <prefix>.reader.<caller>. No caller may use $JS.API on those consumers;
// each may publish under its own reader prefix only, and the manager passes
// a request on to $JS.API only for a consumer named for the caller of its
// subject (ReaderTarget). A NATS permission cannot match part of a token,
// so the consumer's name alone could not bind it to its asker; the caller's
// token in the subject, which the server checks, does.
func ReaderAPIPrefix(p schemas.Prefix, caller string) string {
	return string(p) + ".reader." + caller
}

// ReaderName returns a new name for a consumer read by caller: its
// CallerID, "-", and 130 random bits, which no one can guess.
func ReaderName(caller string) string { return caller + "-" + rand.Text() }

// ReaderTarget returns the $JS.API subject that a reader's request on
// subject (under a ReaderAPIPrefix) is passed on to: CONSUMER.INFO,
// CONSUMER.DELETE or CONSUMER.MSG.NEXT of a consumer whose name is one of
// ReaderName(caller), caller being the id in subject. Any other request is
// not passed on (false).
func ReaderTarget(p schemas.Prefix, subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, string(p)+".reader.")
	if !ok {
		return "", false
	}
	caller, api, ok := strings.Cut(rest, ".")
	if !ok || !schemas.ValidToken(caller) {
		return "", false
	}
	tokens := strings.Split(api, ".")
	switch {
	case len(tokens) == 4 && tokens[0] == "CONSUMER" && (tokens[1] == "INFO" || tokens[1] == "DELETE"):
	case len(tokens) == 5 && tokens[0] == "CONSUMER" && tokens[1] == "MSG" && tokens[2] == "NEXT":
	default:
		return "", false
	}
	name := tokens[len(tokens)-1]
	if !strings.HasPrefix(name, caller+"-") || !schemas.ValidToken(name) {
		return "", false
	}
	return jetstream.DefaultAPIPrefix + api, true
}

// ReadConfig validates r and returns the consumer to create, and the job
// whose messages it reads ("" for an admin's filter that spans jobs, or
// for admission events). Errors name the field.
func (r *ReadRequest) ReadConfig(p schemas.Prefix) (jetstream.ConsumerConfig, string, field.ErrorList) {
	cfg := jetstream.ConsumerConfig{FilterSubject: r.FilterSubject, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: ReaderIdle, MemoryStorage: true, Replicas: 1}
	var errs field.ErrorList
	policy, start := field.NewPath("deliver_policy"), field.NewPath("opt_start_seq")
	switch r.DeliverPolicy {
	case "", "all":
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case "last":
		cfg.DeliverPolicy = jetstream.DeliverLastPolicy
	case "last_per_subject":
		cfg.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	case "new":
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	case "by_start_sequence":
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.OptStartSeq
		if r.OptStartSeq == 0 {
			errs = append(errs, field.Required(start, "with deliver_policy by_start_sequence"))
		}
	default:
		errs = append(errs, field.NotSupported(policy, r.DeliverPolicy,
			[]string{"all", "last", "last_per_subject", "new", "by_start_sequence"}))
	}
	if r.OptStartSeq != 0 && r.DeliverPolicy != "by_start_sequence" {
		errs = append(errs, field.Invalid(start, r.OptStartSeq, "only with deliver_policy by_start_sequence"))
	}
	filter := field.NewPath("filter_subject")
	if !validFilter(r.FilterSubject) {
		return cfg, "", append(errs, field.Invalid(filter, r.FilterSubject, "not a subject filter"))
	}
	var within []string
	for _, s := range JobStreams {
		if p.Stream(s.Family) != r.Stream {
			continue
		}
		if subset(r.FilterSubject, s.Subject(p, "*")) {
			job := strings.Split(r.FilterSubject, ".")[2] // <prefix>.<family>.<job>…
			if !schemas.ValidToken(job) {
				job = "" // a wildcard: every job's
			}
			return cfg, job, errs
		}
		within = append(within, s.Subject(p, "<job>"))
	}
	switch {
	case r.Stream == p.Stream(admissionFamily):
		if all := string(p) + ".admission.>"; !subset(r.FilterSubject, all) {
			errs = append(errs, field.Invalid(filter, r.FilterSubject, "must be within "+all))
		}
	case len(within) == 0:
		errs = append(errs, field.Invalid(field.NewPath("stream"), r.Stream, "not a stream of job messages"))
	default:
		errs = append(errs, field.Invalid(filter, r.FilterSubject, "must be within "+strings.Join(within, " or ")))
	}
	return cfg, "", errs
}

// validFilter reports whether s is a subject filter: dot-separated non-empty
// tokens without spaces, ">" only last.
func validFilter(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		if t == "" || (t == ">" && i != len(tokens)-1) {
			return false
		}
		if len(t) > 1 && strings.ContainsAny(t, "*>") {
			return false
		}
	}
	return true
}

// subset reports whether every subject that filter matches is matched by
// within.
func subset(filter, within string) bool {
	f, w := strings.Split(filter, "."), strings.Split(within, ".")
	for i, wt := range w {
		if wt == ">" {
			return i < len(f)
		}
		if i >= len(f) {
			return false
		}
		switch ft := f[i]; {
		case ft == ">":
			return false
		case wt == "*":
		case ft != wt:
			return false
		}
	}
	return len(f) == len(w)
}

// readerConsumer asks the manager for a consumer reading filter of family's
// stream from seq (0: from the first message), for a connection that may
// not create consumers (WithTokenAuth).
func (c *Client) readerConsumer(ctx context.Context, family schemas.Stream, filter string, seq uint64) (jetstream.Consumer, error) {
	req := ReadRequest{Stream: c.prefix.Stream(family), FilterSubject: filter}
	if seq > 0 {
		req.DeliverPolicy, req.OptStartSeq = "by_start_sequence", seq
	}
	data, _ := json.Marshal(req)
	var reply ReadReply
	err := c.callInto(ctx, c.prefix.Control("read"), data, nil, &reply)
	// Refused: a token the manager does not know (a worker's), a job that is
	// not the caller's, a filter spanning jobs.
	if apiErr := (*schemas.APIError)(nil); errors.As(err, &apiErr) && (apiErr.Code == 401 || apiErr.Code == 403 || apiErr.Code == 404) {
		return nil, fmt.Errorf("%w: %s", ErrNotPermitted, apiErr.Message)
	}
	if err != nil {
		return nil, err
	}
	return c.readers.Consumer(ctx, reply.Stream, reply.Consumer)
}
