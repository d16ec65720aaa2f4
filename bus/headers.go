package bus

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
)

// ErrMalformed is wrapped by Decode and NewMsg errors for a message that
// cannot be decoded, has another schema or fails validation.
var ErrMalformed = errors.New("malformed message")

// carriedKey is the context key of what a message carries to the
// messages it causes.
type carriedKey struct{}

// carried is a message's correlation id and traceparent, kept in a context
// as one value: a handler's context gets both with one allocation.
type carried struct{ correlation, traceparent string }

func carriedBy(ctx context.Context) carried {
	c, _ := ctx.Value(carriedKey{}).(carried)
	return c
}

// WithCorrelationID returns ctx carrying a correlation id; messages published
// with it carry the id in the Pace-Correlation-Id header.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	c := carriedBy(ctx)
	c.correlation = id
	return context.WithValue(ctx, carriedKey{}, c)
}

// CorrelationID returns ctx's correlation id, or "".
func CorrelationID(ctx context.Context) string { return carriedBy(ctx).correlation }

// WithTraceparent returns ctx carrying a W3C traceparent. While tracing is
// on, it is also ctx's remote span context, the parent of the spans
// started from ctx.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	ctx = withRemoteParent(ctx, tp)
	c := carriedBy(ctx)
	c.traceparent = tp
	return context.WithValue(ctx, carriedKey{}, c)
}

// withRemoteParent makes tp ctx's remote span context while tracing is on.
func withRemoteParent(ctx context.Context, tp string) context.Context {
	if tracing.Enabled() {
		if sc, err := tracing.Parse(tp); err == nil {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	return ctx
}

// Traceparent returns ctx's W3C traceparent, or "".
func Traceparent(ctx context.Context) string { return carriedBy(ctx).traceparent }

// MessageContext returns ctx carrying the correlation id and traceparent of a
// received message's headers, so that what a handler publishes continues them.
func MessageContext(ctx context.Context, h nats.Header) context.Context {
	parent := carriedBy(ctx)
	c := carried{correlation: cmp.Or(h.Get(schemas.HeaderCorrelationID), parent.correlation),
		traceparent: cmp.Or(h.Get(schemas.HeaderTraceparent), parent.traceparent)}
	if c == parent {
		return ctx
	}
	if c.traceparent != parent.traceparent {
		ctx = withRemoteParent(ctx, c.traceparent)
	}
	return context.WithValue(ctx, carriedKey{}, c)
}

// NewMsg validates m and encodes it as a message on subject, with the schema
// (its version from schemas.Version), correlation and trace headers. A
// message without a correlation id in ctx starts a new correlation; the
// traceparent continues ctx's trace with a new span id, or starts a trace.
func NewMsg(ctx context.Context, subject string, m schemas.Message) (*nats.Msg, error) {
	return newMsg(subject, m, messageHeader(ctx, m))
}

// Publish stores m on subject in its stream, with the headers NewMsg gives
// it, and waits for the stream's acknowledgement. A non-empty id is the
// message's Nats-Msg-Id, so that a publish retried after a lost
// acknowledgement is stored once.
func (c *Client) Publish(ctx context.Context, subject string, m schemas.Message, id string) error {
	msg, err := NewMsg(ctx, subject, m)
	if err != nil {
		return err
	}
	if id != "" {
		msg.Header.Set(schemas.HeaderMsgID, id)
	}
	_, err = c.js.PublishMsg(ctx, msg)
	return err
}

// messageHeader returns the headers NewMsg gives m. The messages of a
// batch share one (cloned), so that the batch is one correlation and one
// span rather than one per message.
func messageHeader(ctx context.Context, m schemas.Message) nats.Header {
	name, _ := m.Schema()
	id := CorrelationID(ctx)
	if id == "" {
		id = nuid.Next()
	}
	schema := schemaHeaders(name, schemas.Version(m))
	h := nats.Header{
		schemas.HeaderSchema:        schema.name,
		schemas.HeaderSchemaVersion: schema.version,
		schemas.HeaderCorrelationID: {id},
	}
	if tp := traceparentFor(ctx); tp != "" {
		h[schemas.HeaderTraceparent] = []string{tp}
	}
	return h
}

// schemaHeader holds the values of a schema's two headers.
type schemaHeader struct{ name, version []string }

// schemaValues caches the header values of each schema and version, which
// every message shares rather than allocate its own: they are never
// written to (nats.go replaces a header's slice, and appending to a slice
// at capacity copies it).
var schemaValues struct {
	sync.RWMutex
	m map[schemaKey]schemaHeader
}

type schemaKey struct {
	name    string
	version int
}

func schemaHeaders(name string, version int) schemaHeader {
	key := schemaKey{name, version}
	schemaValues.RLock()
	h, ok := schemaValues.m[key]
	schemaValues.RUnlock()
	if ok {
		return h
	}
	h = schemaHeader{name: []string{name}[:1:1], version: []string{strconv.Itoa(version)}[:1:1]}
	schemaValues.Lock()
	if schemaValues.m == nil {
		schemaValues.m = map[schemaKey]schemaHeader{}
	}
	schemaValues.m[key] = h
	schemaValues.Unlock()
	return h
}

// newMsg validates m and encodes it on subject with headers h.
func newMsg(subject string, m schemas.Message, h nats.Header) (*nats.Msg, error) {
	name, _ := m.Schema()
	if errs := m.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, name, errs.ToAggregate())
	}
	data, err := encode(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", name, err)
	}
	return &nats.Msg{Subject: subject, Data: data, Header: h}, nil
}

// Decode reads a message of type T. A schema header, when present, must name
// T's schema with a version no newer than T's; the payload must be JSON that
// passes T's validation (unknown fields are ignored, for forward
// compatibility). Errors wrap ErrMalformed.
func Decode[T any, P interface {
	*T
	schemas.Message
}](data []byte, h nats.Header) (*T, error) {
	v := P(new(T))
	name, version := v.Schema()
	if got := h.Get(schemas.HeaderSchema); got != "" && got != name {
		return nil, fmt.Errorf("%w: schema %q, want %q", ErrMalformed, got, name)
	}
	if got := h.Get(schemas.HeaderSchemaVersion); got != "" {
		n, err := strconv.Atoi(got)
		if err != nil || n < 1 || n > version {
			return nil, fmt.Errorf("%w: %s schema version %q, this build reads 1..%d", ErrMalformed, name, got, version)
		}
	}
	if err := decode(data, v); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, name, err)
	}
	if errs := v.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, name, errs.ToAggregate())
	}
	return (*T)(v), nil
}

// traceparentFor returns the traceparent of a message published from ctx:
// while tracing is on, the span ctx carries (the publisher's span, or the
// remote one it continues) is the message's parent; otherwise, or without
// one, a child of ctx's traceparent. While tracing is off, a message with
// no trace to continue gets none (""): starting a trace no one records
// would cost every message a header for nothing.
func traceparentFor(ctx context.Context) string {
	if tracing.Enabled() {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			return tracing.Traceparent(sc)
		}
	}
	parent := Traceparent(ctx)
	if parent == "" && !tracing.Enabled() {
		return ""
	}
	return childTraceparent(parent)
}

// childTraceparent returns a traceparent continuing parent's trace with a new
// span id and parent's flags, or a new trace when parent is not a valid
// version-00 value. A new trace is not marked sampled: Pace records no span
// of it, and a sampled mark makes the NATS server parse every header of
// every message, looking for trace destinations.
//
// Ids come from math/rand/v2's generator (ChaCha8, seeded by the system):
// unpredictable enough for trace ids, without a system call per message.
func childTraceparent(parent string) string {
	var span [8]byte
	binary.LittleEndian.PutUint64(span[:], rand.Uint64())
	if len(parent) == 55 && parent[:3] == "00-" && parent[35] == '-' && parent[52] == '-' {
		return parent[:36] + hex.EncodeToString(span[:]) + parent[52:]
	}
	var trace [16]byte
	binary.LittleEndian.PutUint64(trace[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(trace[8:], rand.Uint64())
	return "00-" + hex.EncodeToString(trace[:]) + "-" + hex.EncodeToString(span[:]) + "-00"
}
