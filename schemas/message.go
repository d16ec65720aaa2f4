package schemas

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Header names carried by every Pace message. Payloads are JSON; metadata
// travels in NATS headers so that routing never needs the body.
const (
	// HeaderSchema names the payload's schema, e.g. "work_item".
	HeaderSchema = "Pace-Schema"
	// HeaderSchemaVersion is the payload's schema version, a decimal integer.
	HeaderSchemaVersion = "Pace-Schema-Version"
	// HeaderCorrelationID ties together every message caused by one request.
	HeaderCorrelationID = "Pace-Correlation-Id"
	// HeaderTraceparent is the W3C Trace Context header.
	HeaderTraceparent = "traceparent"
	// HeaderMsgID is JetStream's de-duplication header.
	HeaderMsgID = "Nats-Msg-Id"
)

// Message is implemented by every payload type in this package.
type Message interface {
	// Schema returns the schema name and version written in the headers.
	Schema() (name string, version int)
	// Validate reports every invalid field with its JSON path.
	Validate() field.ErrorList
}

// VersionedMessage is implemented by a message whose version depends on
// its content: MessageVersion, at most Schema's, is the lowest version of
// its schema that describes it, and is written in its version header in
// place of Schema's, so that readers of an older version keep reading the
// messages that use nothing newer.
type VersionedMessage interface {
	Message
	MessageVersion() int
}

// Version returns the version written in m's header: MessageVersion for a
// VersionedMessage, else Schema's.
func Version(m Message) int {
	_, version := m.Schema()
	if v, ok := m.(VersionedMessage); ok {
		return min(v.MessageVersion(), version)
	}
	return version
}

// All returns one zero value of each message type, for schema generation and
// documentation. The order is stable.
func All() []Message {
	return []Message{
		&JobSpec{}, &JobRecord{}, &JobEvent{},
		&WorkItem{}, &Result{}, &DeadLetter{},
		&Sample{}, &Progress{}, &Usage{}, &Decision{},
		&KubeRequest{}, &KubeOutcome{}, &AdmissionEvent{}, &LogLine{},
	}
}
