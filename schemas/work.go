package schemas

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WorkItem is one unit of work on pace.work.<job>.
type WorkItem struct {
	// ID identifies the item within its job; it is the de-duplication key of
	// its result. Pace assigns one when a client gives none.
	ID  string `json:"id"`
	Job string `json:"job"`
	// Payload is the item itself, e.g. a line of a workload file.
	Payload string `json:"payload"`
	// CreatedAt is when the item was published.
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// Schema implements Message.
func (*WorkItem) Schema() (string, int) { return "work_item", 1 }

// WorkloadItemID is the id of item n (counted from 1) of a batch job's
// workload, as the manager queues it: n in decimal, zero-padded to six
// digits (000001, 000002, …, 1000000).
func WorkloadItemID(n int) string { return fmt.Sprintf("%06d", n) }

// InWorkload reports whether id is the id of one of the items of a batch
// job whose workload has total items: WorkloadItemID(n) for n in [1, total].
// A batch job's work is its workload, so a result for any other id is for
// an item the job never had.
func InWorkload(id string, total int) bool {
	if len(id) < 6 || len(id) > 6 && id[0] == '0' || len(id) > 10 {
		return false
	}
	n := 0
	for i := range len(id) {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
		n = n*10 + int(id[i]-'0')
	}
	return n >= 1 && n <= total
}

// Validate implements Message.
func (w *WorkItem) Validate() field.ErrorList {
	if ValidToken(w.ID) && ValidToken(w.Job) {
		return nil // the hot path: field paths are built for errors only
	}
	errs := validateToken(nil, field.NewPath("id"), w.ID)
	return validateToken(errs, field.NewPath("job"), w.Job)
}

// Result is the outcome of one successfully processed item, on
// pace.results.<job>.<item>. Each item has exactly one result.
type Result struct {
	ItemID string `json:"item_id"`
	Job    string `json:"job"`
	// Output is what the worker produced (a command's stdout).
	Output string `json:"result"`
	// Worker identifies the worker that produced the result.
	Worker string `json:"worker,omitempty"`
	// Attempt is the delivery that succeeded, starting at 1.
	Attempt    int       `json:"attempt,omitempty"`
	Duration   Duration  `json:"duration,omitempty"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Schema implements Message.
func (*Result) Schema() (string, int) { return "result", 1 }

// Validate implements Message.
func (r *Result) Validate() field.ErrorList {
	if ValidToken(r.ItemID) && ValidToken(r.Job) && r.Attempt >= 0 && r.Duration >= 0 {
		return nil // the hot path: field paths are built for errors only
	}
	errs := validateToken(nil, field.NewPath("item_id"), r.ItemID)
	errs = validateToken(errs, field.NewPath("job"), r.Job)
	if r.Attempt < 0 {
		errs = append(errs, field.Invalid(field.NewPath("attempt"), r.Attempt, "must be >= 0"))
	}
	return nonNegativeDuration(errs, field.NewPath("duration"), r.Duration)
}

// DeadReason says why an item was dead-lettered.
type DeadReason string

// Dead-letter reasons.
const (
	// MaxDeliveries: every allowed delivery failed or timed out.
	MaxDeliveries DeadReason = "max_deliveries"
	// Malformed: the message could not be decoded or was invalid.
	Malformed DeadReason = "malformed"
	// RefusedItem: the item was published to a job that does not accept items
	// (no such job, or one that is stopped, completed, failed, terminated
	// or in error); LastError says which. Raw and Header keep the message
	// as it was published, so that it can be sent again once the job
	// accepts items. Since version 4.
	RefusedItem DeadReason = "refused"
	// NeverQueued: a result for an item that is not in its batch job's
	// workload (see InWorkload), set aside so that it counts for nothing.
	// Raw and Header keep the result as it was published; it is never
	// redriven. Since version 5.
	NeverQueued DeadReason = "never_queued"
)

// DeadReasons lists every reason, in the order they were introduced.
var DeadReasons = []DeadReason{MaxDeliveries, Malformed, RefusedItem, NeverQueued}

// DeadLetter is a message Pace gave up on: a work item on pace.dead.<job>,
// or a message a stage could not read on pace.metrics.<job>.dead. It keeps
// everything needed to inspect or replay the message.
//
// Version 2 keeps a malformed message exactly: Raw holds its bytes (base64
// in JSON, so that any bytes survive) and Header its headers; publishing Raw
// with Header to Subject replays it as it was. Version 1 letters kept a
// malformed message in Payload, as text, which mangled bytes that were not
// UTF-8; readers of version 2 still read them.
//
// Version 3 adds RawObject and RawSize: a malformed message whose letter
// would not fit the bus's max_payload (Raw grows by a third in base64) is
// kept in the dead-letter object store instead, and the letter names it.
// The version is raised so that a reader that does not know RawObject
// refuses the letter rather than misread it as an empty body, and because
// version 2's JSON Schema allows no other property. Readers of version 3
// read versions 1 and 2.
//
// Version 4 adds the reason refused (an item published to a job that does
// not accept items). A new value of an enumeration is a contract change:
// a version 3 reader validates the reason and would refuse such a letter
// as malformed, blaming the letter rather than its own age, and its JSON
// Schema names the reasons it knows. So the version is raised, but only
// for the letters that need it: MessageVersion labels a refused letter 4
// and every other letter 3, which is all they use, so that readers of
// version 3 keep reading the letters they understand while writers are
// upgraded first. Readers of version 4 read versions 1 to 4.
type DeadLetter struct {
	Job string `json:"job"`
	// ItemID is empty when a malformed or refused message had no readable id.
	ItemID string     `json:"item_id,omitempty"`
	Reason DeadReason `json:"reason" jsonschema:"enum=max_deliveries,enum=malformed,enum=refused,enum=never_queued"`
	// LastError is the last failure reported by a worker, or why the
	// message could not be read.
	LastError  string `json:"last_error,omitempty"`
	Deliveries int    `json:"deliveries,omitempty"`
	// Payload is the item's payload (reason max_deliveries, and refused
	// when the message is a readable item); empty for a malformed message,
	// which Raw keeps.
	Payload string `json:"payload"`
	// Subject is the subject the message was published to.
	Subject string `json:"subject,omitempty"`
	// Raw is a malformed or refused message's body, byte for byte; empty,
	// not absent, for an empty body.
	Raw []byte `json:"raw,omitzero"`
	// RawObject, when set, names the object of the dead-letter object
	// store that holds a malformed or refused message's body, byte for
	// byte, in place of Raw; RawSize is its length in bytes.
	RawObject string `json:"raw_object,omitempty"`
	RawSize   int64  `json:"raw_size,omitempty"`
	// Header holds the message's NATS headers (schema, correlation id,
	// traceparent, Nats-Msg-Id).
	Header map[string][]string `json:"header,omitempty"`
	// Sequence is the message's sequence in its stream.
	Sequence uint64    `json:"sequence,omitempty"`
	At       time.Time `json:"at"`
}

// ItemLine reads one line of a text of items (a workload, pace push's
// input): the line without its "\n" or "\r\n" ending is an item's
// payload, unless it is blank.
func ItemLine(line string) (payload string, ok bool) {
	line = strings.TrimRight(line, "\r\n")
	return line, strings.TrimSpace(line) != ""
}

// Schema implements Message.
func (*DeadLetter) Schema() (string, int) { return "dead_letter", 5 }

// Size is the size in bytes of the message the letter keeps, known without
// reading it from the object store.
func (d *DeadLetter) Size() int {
	switch {
	case d.RawObject != "":
		return int(d.RawSize)
	case d.Raw != nil:
		return len(d.Raw)
	}
	return len(d.Payload)
}

// MessageVersion implements VersionedMessage: the version that introduced
// the letter's reason, and 3 (what readers of version 3 read) for the
// reasons older than that.
func (d *DeadLetter) MessageVersion() int {
	switch d.Reason {
	case NeverQueued:
		return 5
	case RefusedItem:
		return 4
	}
	return 3
}

// Validate implements Message.
func (d *DeadLetter) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), d.Job)
	if d.ItemID != "" {
		errs = validateToken(errs, field.NewPath("item_id"), d.ItemID)
	}
	if !slices.Contains(DeadReasons, d.Reason) {
		errs = append(errs, field.NotSupported(field.NewPath("reason"), d.Reason, DeadReasons))
	}
	if d.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	switch {
	case d.RawObject == "" && d.RawSize != 0:
		errs = append(errs, field.Invalid(field.NewPath("raw_size"), d.RawSize, "must be absent without raw_object"))
	case d.RawObject == "":
	case d.Reason == MaxDeliveries:
		errs = append(errs, field.Invalid(field.NewPath("raw_object"), d.RawObject, "only a malformed, refused or never-queued message's letter keeps its body"))
	case d.Raw != nil:
		errs = append(errs, field.Invalid(field.NewPath("raw_object"), d.RawObject, "must be absent with raw"))
	case d.RawSize <= 0:
		errs = append(errs, field.Invalid(field.NewPath("raw_size"), d.RawSize, "must be positive with raw_object"))
	}
	return errs
}
