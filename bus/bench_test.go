package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// benchConcurrency is the number of items in flight in both benchmarks: the
// SDK worker's concurrency, the raw side's fetch size.
const benchConcurrency = 50

var benchRun atomic.Int64

// BenchmarkRoundTrip measures one work item's round trip (pushed, fetched,
// its result stored, acknowledged) through the SDK and through nats.go's
// jetstream package alone, on an open bus and on one that authenticates,
// with the ledger kept as the manager keeps it (each item of a streaming
// job is one more delivery and one more stored entry). A fifth side, the
// raw protocol sending the SDK's messages, splits the gap between the two
// into the messages' cost and the SDK's. The sides run in turn in one
// invocation: task bench runs several, rather than -count, which would run
// each side several times in a row and let a machine whose speed drifts
// favour one side.
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("sdk", benchSDKOpen)
	b.Run("raw", func(b *testing.B) {
		c := bustest.Client(b, bustest.Server(b))
		bustest.KeepLedger(b, c)
		benchRaw(b, c, fmt.Sprintf("raw%d", benchRun.Add(1)), leanMessages)
	})
	// As pace up's bus with a token file: a tenant's connection whose every
	// publish and subscription the server checks against its permissions.
	b.Run("sdk-authenticated", func(b *testing.B) {
		job := fmt.Sprintf("sdk%d", benchRun.Add(1))
		benchSDK(b, authenticated(b, job), job)
	})
	b.Run("raw-authenticated", func(b *testing.B) {
		job := fmt.Sprintf("raw%d", benchRun.Add(1))
		benchRaw(b, authenticated(b, job), job, leanMessages)
	})
	// The raw protocol sending the SDK's messages (its headers and fields):
	// what is left between it and the SDK is the SDK's own machinery.
	b.Run("raw-pace-messages-authenticated", func(b *testing.B) {
		job := fmt.Sprintf("raw%d", benchRun.Add(1))
		benchRaw(b, authenticated(b, job), job, paceMessages)
	})
}

// benchSDKOpen is the SDK's side on an open bus: PushItems, a Worker
// fetching each item, publishing its result and acking it.
func benchSDKOpen(b *testing.B) {
	c := bustest.Client(b, bustest.Server(b))
	bustest.KeepLedger(b, c)
	job := fmt.Sprintf("sdk%d", benchRun.Add(1))
	if _, err := c.OpenJob(context.Background(), job); err != nil {
		b.Fatal(err)
	}
	benchSDK(b, c, job)
}

// authenticated starts a bus that authenticates with Pace's authorization
// service, declares job for the tenant alice and returns alice's client.
func authenticated(b *testing.B, job string) *bus.Client {
	b.Helper()
	a := bustest.Authenticated(b, "alice-token,alice,1\n", map[string]string{job: "alice"})
	bustest.KeepLedger(b, a.Admin)
	srv := a.Server
	alice, err := bus.Connect(context.Background(), "", bus.WithServer(srv), bus.WithTokenAuth("alice-token"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = alice.Close(context.Background()) })
	return alice
}

// benchSDK runs the SDK's round trips on c's existing job.
func benchSDK(b *testing.B, c *bus.Client, job string) {
	ctx := context.Background()
	// The raw side's items: ids 0 to N-1, each its own payload.
	items := make([]schemas.WorkItem, b.N)
	for i := range items {
		items[i].ID = strconv.Itoa(i)
		items[i].Payload = items[i].ID
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
	cpu := startCPU(b)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(wctx) })
	wg.Go(func() {
		if err := c.PushItems(ctx, job, items); err != nil {
			b.Error(err)
		}
	})
	<-finished
	waitResults(b, c, uint64(b.N))
	b.StopTimer()
	cpu.report()
	stop()
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// benchRaw runs the round trips with nats.go's jetstream package alone, on
// c's connection and job's work consumer, by the fastest protocol that
// neither loses nor doubles an item: items (work_item JSON, as a client in
// any language writes them, so that the ledger enters them as it enters
// the SDK's) published asynchronously, each with a message id (a retried
// publish queues it once), fetched in batches of benchConcurrency, each
// read with encoding/json for its id and payload, its result (the least a
// result holds, on the item's own subject, so that it counts) published
// asynchronously with a message id, and the item acknowledged once the
// server has stored its result. m makes the messages.
func benchRaw(b *testing.B, c *bus.Client, job string, m rawMessages) {
	ctx := context.Background()
	js := c.JetStream()
	subject := c.Prefix().Work(job)
	// The job's work consumer: the manager makes it on a bus that
	// authenticates (tenants may not create consumers), the client here.
	cons, err := js.Consumer(ctx, "PACE_WORK", "work-"+job)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = js.CreateOrUpdateConsumer(ctx, "PACE_WORK", jetstream.ConsumerConfig{
			Durable: "work-" + job, FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: -1})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU(b)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range b.N {
			id := strconv.Itoa(i)
			if _, err := js.PublishMsgAsync(m.item(subject, job, id), jetstream.WithMsgID(job+"/"+id),
				jetstream.WithStallWait(10*time.Second)); err != nil {
				b.Error(err)
				return
			}
		}
		<-js.PublishAsyncComplete()
	})
	type answered struct {
		item   jetstream.Msg
		stored jetstream.PubAckFuture
	}
	inflight := make([]answered, 0, benchConcurrency)
	for got := 0; got < b.N; {
		batch, err := cons.Fetch(benchConcurrency, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		inflight = inflight[:0]
		for msg := range batch.Messages() {
			got++
			var item rawItem
			if err := json.Unmarshal(msg.Data(), &item); err != nil {
				b.Fatal(err)
			}
			result, err := m.result(c.Prefix().Results(job, item.ID), job, item)
			if err != nil {
				b.Fatal(err)
			}
			f, err := js.PublishMsgAsync(result, jetstream.WithMsgID(job+"/"+item.ID), jetstream.WithStallWait(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			inflight = append(inflight, answered{msg, f})
		}
		for _, a := range inflight {
			select {
			case <-a.stored.Ok():
				_ = a.item.Ack()
			case err := <-a.stored.Err():
				b.Fatal(err)
			}
		}
	}
	wg.Wait()
	waitResults(b, c, uint64(b.N))
	b.StopTimer()
	cpu.report()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// rawItem is what a client without Pace's SDK reads of a work item.
type rawItem struct {
	ID      string `json:"id"`
	Payload string `json:"payload"`
}

// rawResult is the result such a client writes: the least a result holds,
// or, with Pace's fields, what the SDK writes.
type rawResult struct {
	ItemID     string    `json:"item_id"`
	Job        string    `json:"job"`
	Result     string    `json:"result"`
	Worker     string    `json:"worker,omitempty"`
	Attempt    int       `json:"attempt,omitempty"`
	Duration   string    `json:"duration,omitempty"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// rawMessages makes the raw side's items and results.
type rawMessages struct{ pace bool }

var (
	// leanMessages are the least a correct client sends: no headers, the
	// required fields.
	leanMessages = rawMessages{}
	// paceMessages are the SDK's: schema and correlation headers, an
	// item's creation time, a result's worker, attempt, duration and end.
	paceMessages = rawMessages{pace: true}
)

func (m rawMessages) header(schema string) nats.Header {
	if !m.pace {
		return nil
	}
	return nats.Header{schemas.HeaderSchema: {schema}, schemas.HeaderSchemaVersion: {"1"},
		schemas.HeaderCorrelationID: {"bench-correlation-0000"}}
}

func (m rawMessages) item(subject, job, id string) *nats.Msg {
	created := ""
	if m.pace {
		created = `,"created_at":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"`
	}
	data := []byte(`{"id":"` + id + `","job":"` + job + `","payload":"` + id + `"` + created + `}`)
	return &nats.Msg{Subject: subject, Data: data, Header: m.header("work_item")}
}

func (m rawMessages) result(subject, job string, item rawItem) (*nats.Msg, error) {
	r := rawResult{ItemID: item.ID, Job: job, Result: item.Payload}
	if m.pace {
		r.Worker, r.Attempt, r.Duration, r.FinishedAt = "bench-worker-000000000", 1, "1.5µs", time.Now()
	}
	data, err := json.Marshal(r)
	return &nats.Msg{Subject: subject, Data: data, Header: m.header("result")}, err
}

// cpuMeter measures the CPU time the process (client and embedded server)
// spends during a benchmark. On a machine whose cores are shared, CPU per
// item varies far less between runs than items per second does.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) cpuMeter { return cpuMeter{b, processCPU(b)} }

// report adds the CPU time per item, in microseconds, to the results.
func (m cpuMeter) report() {
	m.b.ReportMetric(float64((processCPU(m.b)-m.start).Microseconds())/float64(m.b.N), "cpu-µs/item")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
