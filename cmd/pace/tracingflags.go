package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/tracing"
)

// tracingFlags configure trace export (docs/tracing.md).
type tracingFlags struct {
	endpoint, protocol string
	items              float64
	viewer             string
}

// defaultItemRatio is the share of items traced when --trace-items is not
// given: enough to see what items cost, little enough for a busy queue.
const defaultItemRatio = 0.01

// add registers the flags of a stage: where to export, and the viewer
// that job pages link to.
func (f *tracingFlags) add(fs *pflag.FlagSet) {
	f.addExport(fs)
	fs.StringVar(&f.viewer, "trace-url", "", "trace viewer URL with {trace_id}, linked from a job's page, e.g. http://jaeger:16686/trace/{trace_id}")
}

// addExport registers where to export traces, and how many items to trace.
func (f *tracingFlags) addExport(fs *pflag.FlagSet) {
	fs.StringVar(&f.endpoint, "otlp-endpoint", "", "OTLP receiver to export traces to, e.g. http://localhost:4318 "+
		"(default: OTEL_EXPORTER_OTLP_ENDPOINT; neither set: no traces)")
	fs.StringVar(&f.protocol, "otlp-protocol", "", "OTLP protocol: http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)")
	fs.Float64Var(&f.items, "trace-items", itemRatioFromEnv(), "share of items whose processing is traced, 0 to 1; failed items always are")
}

// itemRatioFromEnv reads PACE_TRACE_ITEMS, which Pace gives the workers it
// starts, so that they trace as many items as the stage that started them.
func itemRatioFromEnv() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("PACE_TRACE_ITEMS"), 64); err == nil {
		return v
	}
	return defaultItemRatio
}

func (f *tracingFlags) config(service string) tracing.Config {
	return tracing.Config{Endpoint: f.endpoint, Protocol: f.protocol, Service: service, ItemRatio: f.items}
}

func (f *tracingFlags) validate() error {
	if err := f.config("").Validate(); err != nil {
		return usageError("--otlp-endpoint, --otlp-protocol, --trace-items: %v", err)
	}
	if f.viewer != "" && !strings.Contains(f.viewer, "{trace_id}") {
		return usageError("--trace-url %q: must contain {trace_id}", f.viewer)
	}
	return nil
}

// start exports the process's traces as service until the returned func
// is called, which flushes what is left within a few seconds.
func (f *tracingFlags) start(ctx context.Context, a *app, service string) (func(), error) {
	shutdown, err := tracing.Start(ctx, f.config(service))
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	if tracing.Enabled() {
		a.log.Info("exporting traces", "service", service, "item_ratio", f.items)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			a.log.Warn("traces not flushed", "err", err)
		}
	}, nil
}

// workerEnv is what the workers a stage starts need to export their items'
// traces to the same receiver, nothing while tracing is off; a receiver
// that needs credentials (OTEL_EXPORTER_OTLP_HEADERS) gets no worker spans.
func (f *tracingFlags) workerEnv() []string {
	if !f.config("").On() {
		return nil
	}
	env := []string{"PACE_TRACE_ITEMS=" + strconv.FormatFloat(f.items, 'g', -1, 64)}
	for _, kv := range [][2]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", f.endpoint},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", f.protocol},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")},
	} { // not OTEL_EXPORTER_OTLP_HEADERS: a receiver's credentials are not a tenant's

		if kv[1] != "" && !hasKey(env, kv[0]) {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	return env
}

func hasKey(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}
