package bus_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// benchConcurrency is the number of items in flight in both benchmarks.
const benchConcurrency = 16

var benchRun atomic.Int64

// BenchmarkSDK measures one item's round trip through the SDK: PushItems,
// a Worker fetching it, publishing its deduplicated result and acking it.
func BenchmarkSDK(b *testing.B) {
	c := bustest.Client(b, bustest.Server(b))
	ctx := context.Background()
	job := fmt.Sprintf("sdk%d", benchRun.Add(1))
	items := make([]schemas.WorkItem, b.N)
	for i := range items {
		items[i].Payload = strconv.Itoa(i)
	}
	if _, err := c.OpenJob(ctx, job); err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	finished := make(chan struct{})
	w, err := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		if done.Add(1) == int64(b.N) {
			close(finished)
		}
		return it.Payload, nil
	}, bus.WithConcurrency(benchConcurrency))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(wctx) })
	for start := 0; start < len(items); start += 1000 {
		if err := c.PushItems(ctx, job, items[start:min(start+1000, len(items))]); err != nil {
			b.Fatal(err)
		}
	}
	<-finished
	waitResults(b, c, uint64(b.N))
	b.StopTimer()
	stop()
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkRawJetStream does the same work with nats.go's jetstream package
// alone: async publish, fetch, publish the result with a message id, ack.
func BenchmarkRawJetStream(b *testing.B) {
	c := bustest.Client(b, bustest.Server(b))
	ctx := context.Background()
	js := c.JetStream()
	job := fmt.Sprintf("raw%d", benchRun.Add(1))
	subject := c.Prefix().Work(job)
	cons, err := js.CreateOrUpdateConsumer(ctx, "PACE_WORK", jetstream.ConsumerConfig{
		Durable: "raw-" + job, FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range b.N {
			if _, err := js.PublishAsync(subject, []byte(strconv.Itoa(i)), jetstream.WithStallWait(10*time.Second)); err != nil {
				b.Error(err)
				return
			}
		}
		<-js.PublishAsyncComplete()
	})
	for got := 0; got < b.N; {
		batch, err := cons.Fetch(benchConcurrency, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		var inner sync.WaitGroup
		for msg := range batch.Messages() {
			got++
			inner.Go(func() {
				md, _ := msg.Metadata()
				id := strconv.FormatUint(md.Sequence.Stream, 10)
				if _, err := js.Publish(ctx, c.Prefix().Results(job, id), msg.Data(), jetstream.WithMsgID(job+"/"+id)); err != nil {
					b.Error(err)
				}
				_ = msg.Ack()
			})
		}
		inner.Wait()
	}
	wg.Wait()
	waitResults(b, c, uint64(b.N))
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

func waitResults(b *testing.B, c *bus.Client, n uint64) {
	b.Helper()
	st, err := c.JetStream().Stream(context.Background(), "PACE_RESULTS")
	if err != nil {
		b.Fatal(err)
	}
	for {
		info, err := st.Info(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if info.State.Msgs >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
