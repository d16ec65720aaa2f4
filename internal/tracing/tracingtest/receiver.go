// Package tracingtest runs a real OTLP trace receiver, over HTTP
// (http/protobuf) and over gRPC, that keeps the spans it is sent, for
// tests of what Pace exports.
package tracingtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is an exported span, as the receiver decoded it.
type Span struct {
	TraceID, SpanID, ParentID string // hex; ParentID empty for a root
	Name, Service             string
	Kind                      tracepb.Span_SpanKind
	Attrs                     map[string]string // values in their text form
	Error                     bool              // status code ERROR
}

// Receiver keeps the spans sent to its HTTP and gRPC endpoints.
type Receiver struct {
	mu    sync.Mutex
	spans []Span

	http *httptest.Server
	grpc *grpc.Server
	addr string
}

// Start starts a receiver that stops when t ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	r.http = httptest.NewServer(mux)
	t.Cleanup(r.http.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.grpc = grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(r.grpc, grpcService{r: r})
	go func() { _ = r.grpc.Serve(ln) }()
	t.Cleanup(r.grpc.Stop)
	return r
}

// HTTPEndpoint is the base URL of the http/protobuf receiver (it serves
// /v1/traces), as OTEL_EXPORTER_OTLP_ENDPOINT takes it.
func (r *Receiver) HTTPEndpoint() string { return r.http.URL }

// GRPCEndpoint is the URL of the gRPC receiver.
func (r *Receiver) GRPCEndpoint() string { return "http://" + r.addr }

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in coltracepb.ExportTraceServiceRequest
	if req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	if err := proto.Unmarshal(body, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.keep(&in)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, in *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.r.keep(in)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) keep(in *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range in.GetResourceSpans() {
		service := text(attrs(rs.GetResource().GetAttributes())["service.name"])
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Service: service, Kind: s.GetKind(),
					Attrs: map[string]string{}, Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
				for k, v := range attrs(s.GetAttributes()) {
					sp.Attrs[k] = text(v)
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := make(map[string]*commonpb.AnyValue, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	}
	return ""
}
