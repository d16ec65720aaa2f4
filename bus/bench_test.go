package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
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

// benchConcurrency is the number of items in flight on every side: the
// SDK worker's concurrency, the raw side's fetch size.
const benchConcurrency = 50

// benchTurns is how many turns each side takes in a run.
const benchTurns = 10

var benchRun atomic.Int64

// BenchmarkRoundTrip measures one work item's round trip (pushed, fetched,
// its result stored, acknowledged) through the SDK and through nats.go's
// jetstream package alone, on an open bus and on one that authenticates,
// with the ledger kept as the manager keeps it (each item of a streaming
// job is one more delivery and one more stored entry). On the bus that
// authenticates, a third side, the raw protocol sending the SDK's messages,
// splits the gap between the two into the messages' cost and the SDK's.
//
// Each side has its own bus and job, set up before the clock starts. The
// sides then take turns, a tenth of the items each (benchTurns), in an
// order that alternates from turn to turn, so that a machine whose speed
// drifts over seconds slows each side alike. Every side moves the same
// items (ids 0 to N-1, each its own payload). For each side, items/s is its
// items over the time of its turns, cpu-µs/item the CPU time of the whole
// process (client and embedded servers) during its turns per item, and
// allocs/item its allocations per item; sdk/<side> is the SDK's items/s
// over that side's.
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("open", func(b *testing.B) {
		sdk, raw := openBus(b), openBus(b)
		takeTurns(b, sdkSide(b, sdk, benchJob("sdk")), rawSide(b, "raw", raw, benchJob("raw"), leanMessages))
	})
	// As pace up's bus with a token file: a tenant's connection whose every
	// publish and subscription the server checks against its permissions.
	b.Run("authenticated", func(b *testing.B) {
		sdk, raw, rawSDK := benchJob("sdk"), benchJob("raw"), benchJob("raw")
		takeTurns(b, sdkSide(b, authenticated(b, sdk), sdk),
			rawSide(b, "raw", authenticated(b, raw), raw, leanMessages),
			// The raw protocol sending the SDK's messages (its headers and
			// fields): what is left between it and the SDK is the SDK's own work.
			rawSide(b, "raw-sdk-messages", authenticated(b, rawSDK), rawSDK, paceMessages))
	})
}

func benchJob(side string) string { return fmt.Sprintf("%s%d", side, benchRun.Add(1)) }

// side is one way of moving items through a bus.
type side struct {
	name string
	// turn moves items [from, to) and returns once their results are stored.
	turn func(b *testing.B, from, to int)

	elapsed, cpu time.Duration
	allocs       uint64
}

// takeTurns runs the sides in turns over b.N items and reports each side's
// figures and the first side's ratio to each other.
func takeTurns(b *testing.B, sides ...*side) {
	b.ResetTimer()
	order := slices.Clone(sides)
	for t := range benchTurns {
		from, to := t*b.N/benchTurns, (t+1)*b.N/benchTurns
		if from == to {
			continue
		}
		for _, s := range order {
			s.measure(b, from, to)
		}
		slices.Reverse(order)
	}
	b.StopTimer()
	for _, s := range sides {
		b.ReportMetric(s.rate(b.N), s.name+"-items/s")
		b.ReportMetric(float64(s.cpu.Microseconds())/float64(b.N), s.name+"-cpu-µs/item")
		b.ReportMetric(float64(s.allocs)/float64(b.N), s.name+"-allocs/item")
	}
	for _, s := range sides[1:] {
		b.ReportMetric(sides[0].rate(b.N)/s.rate(b.N), sides[0].name+"/"+s.name)
	}
}

// measure runs one turn, from a collected heap so that no side pays for
// another's garbage.
func (s *side) measure(b *testing.B, from, to int) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs, cpu, start := ms.Mallocs, processCPU(b), time.Now()
	s.turn(b, from, to)
	s.elapsed += time.Since(start)
	s.cpu += processCPU(b) - cpu
	runtime.ReadMemStats(&ms)
	s.allocs += ms.Mallocs - mallocs
}

func (s *side) rate(n int) float64 { return float64(n) / s.elapsed.Seconds() }

// openBus starts a bus that does not authenticate, with the ledger kept on
// a connection of its own, as the manager keeps it, and returns a client.
func openBus(b *testing.B) *bus.Client {
	srv := bustest.Server(b)
	bustest.KeepLedger(b, bustest.Client(b, srv))
	return bustest.Client(b, srv)
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

// sdkSide is the SDK's round trip on c's job: PushItems, and a Worker
// (running between turns too) fetching each item, publishing its result
// and acking it.
func sdkSide(b *testing.B, c *bus.Client, job string) *side {
	items := make([]schemas.WorkItem, b.N)
	for i := range items {
		items[i].ID = strconv.Itoa(i)
		items[i].Payload = items[i].ID
	}
	w, err := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return it.Payload, nil
	}, bus.WithConcurrency(benchConcurrency))
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	b.Cleanup(func() { stop(); wg.Wait() })
	return &side{name: "sdk", turn: func(b *testing.B, from, to int) {
		if err := c.PushItems(ctx, job, items[from:to]); err != nil {
			b.Fatal(err)
		}
		// The worker counts the results the server has stored: waiting on
		// it spares the server the stream requests waitResults makes, which
		// the raw side, whose turn ends with its results stored, never makes
		// while items flow.
		for w.Stats().Processed < int64(to) {
			time.Sleep(time.Millisecond)
		}
		waitResults(b, c, uint64(to))
	}}
}

// rawSide is the round trip with nats.go's jetstream package alone, on c's
// connection and job's work consumer, by the fastest protocol that neither
// loses nor doubles an item: items (work_item JSON, as a client in any
// language writes them, so that the ledger enters them as it enters the
// SDK's) published asynchronously, each with a message id (a retried
// publish queues it once), fetched in batches of benchConcurrency, each
// read with encoding/json for its id and payload, its result (the least a
// result holds, on the item's own subject, so that it counts) published
// asynchronously with a message id, and the item acknowledged once the
// server has stored its result. m makes the messages.
func rawSide(b *testing.B, name string, c *bus.Client, job string, m rawMessages) *side {
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
	type answered struct {
		item   jetstream.Msg
		stored jetstream.PubAckFuture
	}
	inflight := make([]answered, 0, benchConcurrency)
	return &side{name: name, turn: func(b *testing.B, from, to int) {
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := from; i < to; i++ {
				id := strconv.Itoa(i)
				if _, err := js.PublishMsgAsync(m.item(subject, job, id), jetstream.WithMsgID(job+"/"+id),
					jetstream.WithStallWait(10*time.Second)); err != nil {
					b.Error(err)
					return
				}
			}
			<-js.PublishAsyncComplete()
		})
		for left := to - from; left > 0; {
			batch, err := cons.Fetch(min(benchConcurrency, left), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			inflight = inflight[:0]
			for msg := range batch.Messages() {
				left--
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
		waitResults(b, c, uint64(to))
	}}
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

// processCPU is the CPU time the process (clients and embedded servers) has
// used. On a machine whose cores are shared, CPU per item varies less
// between runs than items per second does.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitResults returns once c's bus holds n results.
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
