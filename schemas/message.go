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

// All returns one zero value of each message type, for schema generation and
// documentation. The order is stable.
func All() []Message {
	return []Message{
		&JobSpec{}, &JobRecord{}, &JobEvent{},
		&WorkItem{}, &Result{}, &DeadLetter{},
		&Sample{}, &Progress{}, &Decision{},
		&KubeRequest{}, &KubeOutcome{}, &AdmissionEvent{}, &LogLine{},
	}
}
