package bus

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pace-platform/pace/internal/tracing"
)

// Span attributes of OpenTelemetry's messaging conventions, and Pace's own.
const (
	attrMessagingSystem    = attribute.Key("messaging.system")
	attrMessagingOperation = attribute.Key("messaging.operation.type")
	attrMessagingDest      = attribute.Key("messaging.destination.name")
	attrMessagingMessageID = attribute.Key("messaging.message.id")
	attrMessagingConsumer  = attribute.Key("messaging.consumer.group.name")
	attrMessagingDelivery  = attribute.Key("messaging.nats.delivery_count")
	attrJob                = attribute.Key("pace.job")
)

// itemSpan starts the span of one delivery of a job's item, received on
// subject through consumer: a child of the span that published the item,
// sampled at the configured item ratio (tracing.ItemKey).
func itemSpan(ctx context.Context, subject, consumer, job, item string, delivery uint64) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, "process "+subject, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attrMessagingSystem.String("nats"),
			attrMessagingOperation.String("process"),
			attrMessagingDest.String(subject),
			attrMessagingMessageID.String(item),
			attrMessagingConsumer.String(consumer),
			attrMessagingDelivery.Int64(int64(delivery)),
			attrJob.String(job),
			tracing.ItemKey.String(item),
		))
}
