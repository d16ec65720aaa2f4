// Package tracing exports OpenTelemetry traces of Pace's work over OTLP:
// one trace per job, from its submission and APF admission through its
// items, the controller's decisions and the Kubernetes calls made for it,
// linked across processes by the W3C traceparent every message carries.
//
// Tracing is off unless an OTLP endpoint is configured (Config.Endpoint,
// or the standard OTEL_EXPORTER_OTLP_ENDPOINT and
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables); while it is off, Enabled
// is false and the hot paths that check it do no tracing work at all.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of Pace's spans.
const ScopeName = "github.com/pace-platform/pace"

// Protocols an OTLP exporter speaks.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// ItemKey marks a span as one item's processing: such spans are sampled
// at Config.ItemRatio, and always exported when they end in error.
const ItemKey = attribute.Key("pace.item.id")

var enabled atomic.Bool

// Enabled reports whether spans are being exported.
func Enabled() bool { return enabled.Load() }

// Tracer returns Pace's tracer (a no-op one while tracing is off).
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Config configures trace export.
type Config struct {
	// Endpoint is the OTLP receiver's base URL, as in
	// OTEL_EXPORTER_OTLP_ENDPOINT (http://collector:4318 for http/protobuf,
	// which sends to its /v1/traces; http://collector:4317 for grpc). Empty: the standard
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
	// variables; none set: tracing is off.
	Endpoint string
	// Protocol is grpc or http/protobuf. Empty: the standard
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
	// variables, else http/protobuf (the specification's default).
	Protocol string
	// Service is the service.name of the process's spans, e.g. pace or
	// pace-controller. OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override it.
	Service string
	// ItemRatio is the fraction of items whose processing is traced, from
	// 0 to 1; items that fail are traced whatever it is.
	ItemRatio float64
}

// On reports whether c, with the process's environment, turns tracing on.
func (c Config) On() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" ||
		os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Validate checks the fields a user sets.
func (c Config) Validate() error {
	if c.ItemRatio < 0 || c.ItemRatio > 1 {
		return fmt.Errorf("item trace ratio %v: must be in [0, 1]", c.ItemRatio)
	}
	switch c.protocol() {
	case ProtocolGRPC, ProtocolHTTP:
	default:
		return fmt.Errorf("OTLP protocol %q: must be %s or %s", c.protocol(), ProtocolGRPC, ProtocolHTTP)
	}
	if c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
		return fmt.Errorf("OTLP endpoint %q: must be a URL such as http://collector:4318", c.Endpoint)
	}
	return nil
}

func (c Config) protocol() string {
	for _, p := range []string{c.Protocol, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")} {
		if p != "" {
			return p
		}
	}
	return ProtocolHTTP
}

// Start installs the process's tracer provider and the W3C trace-context
// propagator when c turns tracing on, and returns the function that flushes
// and stops it (a no-op when tracing is off).
func Start(ctx context.Context, c Config) (shutdown func(context.Context) error, err error) {
	if !c.On() {
		return func(context.Context) error { return nil }, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if c.protocol() == ProtocolGRPC {
		var opts []otlptracegrpc.Option
		if c.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(c.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if c.Endpoint != "" { // a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: the signal's path is appended
			u, perr := url.Parse(c.Endpoint)
			if perr != nil {
				return nil, fmt.Errorf("OTLP endpoint %q: %w", c.Endpoint, perr)
			}
			opts = append(opts, otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path.Join("/", u.Path, "v1/traces")))
			if u.Scheme == "http" {
				opts = append(opts, otlptracehttp.WithInsecure())
			}
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return install(ctx, c, sdktrace.NewBatchSpanProcessor(exp)), nil
}

// install makes a tracer provider sending spans to next the process's.
func install(ctx context.Context, c Config, next sdktrace.SpanProcessor) func(context.Context) error {
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", c.Service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		otel.Handle(err) // a partial resource is still usable
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler{items: c.ItemRatio}),
		sdktrace.WithSpanProcessor(keepFailures{next}),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}
}

// sampler samples every span whose parent is sampled, or that has none,
// but an item's processing (ItemKey) only at the item ratio; the others
// are recorded without the sampled flag, so that keepFailures can still
// export one that fails.
type sampler struct{ items float64 }

func (s sampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	ts := trace.SpanContextFromContext(p.ParentContext).TraceState()
	parent := trace.SpanContextFromContext(p.ParentContext)
	decision := sdktrace.RecordAndSample
	if parent.IsValid() && !parent.IsSampled() {
		decision = sdktrace.Drop
	}
	if decision == sdktrace.RecordAndSample && isItem(p.Attributes) && rand.Float64() >= s.items {
		decision = sdktrace.RecordOnly
	}
	return sdktrace.SamplingResult{Decision: decision, Tracestate: ts}
}

func (s sampler) Description() string { return fmt.Sprintf("PaceSampler{items:%g}", s.items) }

func isItem(attrs []attribute.KeyValue) bool {
	for _, a := range attrs {
		if a.Key == ItemKey {
			return true
		}
	}
	return false
}

// keepFailures passes every span on to next, and a recorded but unsampled
// span that ended in error as a sampled one: failed items are always
// exported, whatever the item ratio.
type keepFailures struct{ next sdktrace.SpanProcessor }

func (k keepFailures) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { k.next.OnStart(ctx, s) }

func (k keepFailures) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() && s.Status().Code == codes.Error {
		s = sampled{s}
	}
	k.next.OnEnd(s)
}

func (k keepFailures) Shutdown(ctx context.Context) error   { return k.next.Shutdown(ctx) }
func (k keepFailures) ForceFlush(ctx context.Context) error { return k.next.ForceFlush(ctx) }

// sampled is a span exported as sampled.
type sampled struct{ sdktrace.ReadOnlySpan }

func (s sampled) SpanContext() trace.SpanContext {
	return s.ReadOnlySpan.SpanContext().WithTraceFlags(trace.FlagsSampled)
}

// Fail marks span as failed with err.
func Fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// errNotParsed is returned by Parse for a malformed traceparent.
var errNotParsed = errors.New("not a version-00 traceparent")

// Parse reads a W3C traceparent header as a remote span context.
func Parse(tp string) (trace.SpanContext, error) {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return sc, errNotParsed
	}
	return sc, nil
}

// Traceparent formats sc as a W3C traceparent header.
func Traceparent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// HTTP wraps h so that each request it serves is a server span, a child of
// the caller's traceparent header if it sends one. While tracing is off it
// serves h untouched.
func HTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Enabled() {
			h.ServeHTTP(w, r)
			return
		}
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		ctx, span := Tracer().Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
				attribute.String("url.scheme", scheme), attribute.String("server.address", r.Host),
				attribute.String("user_agent.original", r.UserAgent())))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.code))
		if sw.code >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(sw.code))
		}
	})
}

// statusWriter remembers the status code written; Unwrap lets
// http.ResponseController reach the writer's Flush and deadlines.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	w.wrote = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
