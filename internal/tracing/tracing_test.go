package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/internal/tracing/tracingtest"
)

// Each protocol exports to a real OTLP receiver: every span of a trace but
// the items' beyond the ratio (0 here), and a failed item whatever the
// ratio, with the process's service name.
func TestExportToARealReceiver(t *testing.T) {
	for _, protocol := range []string{tracing.ProtocolHTTP, tracing.ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			r := tracingtest.Start(t)
			endpoint := r.HTTPEndpoint()
			if protocol == tracing.ProtocolGRPC {
				endpoint = r.GRPCEndpoint()
			}
			ctx := context.Background()
			shutdown, err := tracing.Start(ctx, tracing.Config{Endpoint: endpoint, Protocol: protocol, Service: "pace-test"})
			if err != nil {
				t.Fatal(err)
			}
			if !tracing.Enabled() {
				t.Fatal("tracing not enabled with an endpoint")
			}
			ctx, root := tracing.Tracer().Start(ctx, "root")
			_, ok := tracing.Tracer().Start(ctx, "item ok", trace.WithAttributes(tracing.ItemKey.String("1")))
			ok.End()
			_, bad := tracing.Tracer().Start(ctx, "item failed", trace.WithAttributes(tracing.ItemKey.String("2")))
			tracing.Fail(bad, errors.New("exit status 1"))
			bad.End()
			root.End()
			if err := shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if tracing.Enabled() {
				t.Error("tracing still enabled after shutdown")
			}
			got := map[string]tracingtest.Span{}
			for _, s := range r.Spans() {
				got[s.Name] = s
			}
			if len(got) != 2 {
				t.Fatalf("exported spans %v, want root and the failed item", got)
			}
			rs, fs := got["root"], got["item failed"]
			if rs.Service != "pace-test" || rs.ParentID != "" {
				t.Errorf("root span %+v, want service pace-test and no parent", rs)
			}
			if !fs.Error || fs.ParentID != rs.SpanID || fs.TraceID != rs.TraceID || fs.Attrs["pace.item.id"] != "2" {
				t.Errorf("failed item span %+v, want an error child of root %s with pace.item.id 2", fs, rs.SpanID)
			}
		})
	}
}

// With the ratio at 1 every item is exported; an HTTP request continues
// its caller's traceparent.
func TestItemsAtRatioOneAndHTTPParents(t *testing.T) {
	r := tracingtest.Start(t)
	ctx := context.Background()
	shutdown, err := tracing.Start(ctx, tracing.Config{Endpoint: r.HTTPEndpoint(), Service: "pace", ItemRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, item := tracing.Tracer().Start(ctx, "item", trace.WithAttributes(tracing.ItemKey.String("1")))
	item.End()
	srv := httptest.NewServer(tracing.HTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})))
	defer srv.Close()
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/submissions", nil)
	req.Header.Set("traceparent", caller)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.Spans() {
		names = append(names, s.Name)
		if s.Name == "POST /submissions" && (s.TraceID != "0af7651916cd43dd8448eb211c80319c" ||
			s.ParentID != "b7ad6b7169203331" || s.Attrs["http.response.status_code"] != "418") {
			t.Errorf("server span %+v, want a child of the caller's span with status 418", s)
		}
	}
	if len(names) != 2 {
		t.Errorf("exported %v, want the item and the server span", names)
	}
}

func TestTraceparentRoundTrip(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	sc, err := tracing.Parse(tp)
	if err != nil {
		t.Fatal(err)
	}
	if got := tracing.Traceparent(sc); got != tp {
		t.Errorf("Traceparent(Parse(%s)) = %s", tp, got)
	}
	for _, bad := range []string{"", "00-xyz", "00-00000000000000000000000000000000-b7ad6b7169203331-01"} {
		if _, err := tracing.Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestConfig(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if (tracing.Config{}).On() {
		t.Error("tracing on without an endpoint")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	if !(tracing.Config{}).On() {
		t.Error("tracing off with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if (tracing.Config{}).On() {
		t.Error("tracing on with OTEL_SDK_DISABLED=true")
	}
	for _, bad := range []tracing.Config{{ItemRatio: 2}, {Protocol: "thrift"}, {Endpoint: "collector:4318"}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
