package collector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/collector"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type replicas map[string]int

func (r replicas) Count(job string) int { return r[job] }

// samples records the raw samples published on the bus, per job.
type samples struct {
	mu  sync.Mutex
	got map[string][]schemas.Sample
}

func record(t *testing.T, c *bus.Client) *samples {
	s := &samples{got: map[string][]schemas.Sample{}}
	sub, err := c.Conn().Subscribe(c.Prefix().Metrics("*", schemas.RawMetrics), func(m *nats.Msg) {
		v, err := bus.Decode[schemas.Sample](m.Data, m.Header)
		if err != nil {
			t.Errorf("sample: %v", err)
			return
		}
		if m.Header.Get("Nats-TTL") == "" {
			t.Errorf("raw sample of %s without a Nats-TTL: it would stay as long as progress", v.Job)
		}
		s.mu.Lock()
		s.got[v.Job] = append(s.got[v.Job], *v)
		s.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return s
}

func (s *samples) last(job string) (schemas.Sample, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.got[job])
	if n == 0 {
		return schemas.Sample{}, 0
	}
	return s.got[job][n-1], n
}

// waitFor waits until job's latest sample satisfies cond and returns it.
func (s *samples) waitFor(t *testing.T, job, what string, cond func(schemas.Sample, int) bool) schemas.Sample {
	t.Helper()
	var got schemas.Sample
	bustest.Eventually(t, 10*time.Second, job+": "+what, func() bool {
		var n int
		got, n = s.last(job)
		return n > 0 && cond(got, n)
	})
	return got
}

func putRecord(t *testing.T, c *bus.Client, rec schemas.JobRecord) {
	t.Helper()
	ctx := context.Background()
	kv, err := c.JetStream().KeyValue(ctx, c.Prefix().Bucket("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(rec)
	if _, err := kv.Put(ctx, rec.ID, data); err != nil {
		t.Fatal(err)
	}
}

func batchRecord(id string, total int) schemas.JobRecord {
	spec := schemas.JobSpec{Mode: schemas.Batch, Workload: schemas.Workload{Items: []string{"x"}},
		Deadline: schemas.Deadline{After: schemas.Duration(100 * time.Second)}}.WithDefaults()
	return schemas.JobRecord{ID: id, Spec: spec, State: schemas.Ongoing, Total: total, CreatedAt: t0, StartedAt: t0}
}

// TestCollectorKnownStates puts jobs in known queue states on a real
// JetStream and checks every count of their samples, then follows queue
// activity, the interval and the end of a job.
func TestCollectorKnownStates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := bustest.Client(t, bustest.Server(t))
	js := c.JetStream()
	got := record(t, c)

	// j1: batch of 10; 4 delivered of which 2 done; 1 dead letter; 6 queued;
	// and a result for an item it never had, which must not count.
	j1 := batchRecord("j1", 10)
	putRecord(t, c, j1)
	if err := c.Queues().EnsureWork(ctx, &j1); err != nil {
		t.Fatal(err)
	}
	if err := c.QueueWorkload(ctx, "j1", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}); err != nil {
		t.Fatal(err)
	}
	work, err := js.Consumer(ctx, c.Prefix().Stream(schemas.StreamWork), "work-j1")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := work.Fetch(4)
	if err != nil {
		t.Fatal(err)
	}
	var held []jetstream.Msg
	for m := range batch.Messages() {
		held = append(held, m)
	}
	if len(held) != 4 {
		t.Fatalf("fetched %d items, want 4", len(held))
	}
	finish := func(m jetstream.Msg) { t.Helper(); workItem(ctx, t, c, "j1", m) }
	finish(held[0])
	finish(held[1])
	if _, err := js.Publish(ctx, c.Prefix().Results("j1", "forged"), []byte(`{"job":"j1","item_id":"forged"}`)); err != nil {
		t.Fatal(err)
	}
	dl, err := bus.NewMsg(ctx, c.Prefix().Dead("j1"), &schemas.DeadLetter{Job: "j1", Reason: schemas.MaxDeliveries, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		t.Fatal(err)
	}

	// j2: streaming with 3 items queued; j3: completed before the collector ran.
	if err := c.PushItems(ctx, "j2", bus.Items("x", "y", "z")); err != nil {
		t.Fatal(err)
	}
	done := batchRecord("j3", 1)
	done.State = schemas.Completed
	putRecord(t, c, done)

	clk := testingclock.NewFakeClock(t0.Add(30 * time.Second))
	// A long interval, so that activity samples cannot be interval ones.
	// From 2 results on, a job's results are counted by a consumer: j1's
	// (2, then 3), not j2's (none).
	col, err := collector.New(collector.Deps{Bus: c}, collector.Config{Interval: time.Hour, ActivityGap: 200 * time.Millisecond, CountConsumerFrom: 2},
		collector.WithReplicas(replicas{"j1": 2}), collector.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- col.Run(ctx) }()

	s1 := got.waitFor(t, "j1", "first sample", func(schemas.Sample, int) bool { return true })
	want := schemas.Sample{Job: "j1", At: clk.Now(), Mode: schemas.Batch, State: schemas.Ongoing, Total: 10,
		Pending: 6, InFlight: 2, Done: 2, Dead: 1, Unqueued: 1, Replicas: 2, Published: 11, StartedAt: t0, Deadline: t0.Add(100 * time.Second)}
	if diff := cmp.Diff(want, s1); diff != "" {
		t.Errorf("j1 sample (-want +got):\n%s", diff)
	}
	s2 := got.waitFor(t, "j2", "first sample", func(schemas.Sample, int) bool { return true })
	if s2.Pending != 3 || s2.Mode != schemas.Streaming || s2.Oldest.IsZero() || s2.Total != 0 {
		t.Errorf("j2 sample = %+v, want 3 pending, streaming, oldest set", s2)
	}
	if _, n := got.last("j3"); n != 0 {
		t.Errorf("j3 (completed) sampled %d times, want 0", n)
	}

	// Queue activity: a third result makes j1 due at the next activity tick.
	// The result reaches the collector asynchronously, so tick until it shows.
	_, n1 := got.last("j1")
	finish(held[2])
	got.waitFor(t, "j1", "sample after activity", func(s schemas.Sample, n int) bool {
		clk.Step(200 * time.Millisecond)
		return n > n1 && s.Done == 3
	})

	// The interval samples every running job, idle ones too, if less often
	// (TestIdleJobsAreSampledLessOften): tick until it shows.
	_, n2 := got.last("j2")
	got.waitFor(t, "j2", "interval sample", func(_ schemas.Sample, n int) bool {
		clk.Step(time.Hour)
		return n > n2
	})

	// A lifecycle event samples its job at once, without a tick.
	_, n2 = got.last("j2")
	if err := c.Conn().Publish(c.Prefix().Jobs("j2", schemas.EventStopping), nil); err != nil {
		t.Fatal(err)
	}
	got.waitFor(t, "j2", "sample on a job event", func(_ schemas.Sample, n int) bool { return n > n2 })
	_, n2 = got.last("j2")

	// A running job's counting consumer has an unguessable name and cannot
	// be fetched from: it is a push consumer that delivers nowhere. A job
	// with fewer results than CountConsumerFrom has none.
	countersOf := func(job string) []*jetstream.ConsumerInfo {
		st, err := js.Stream(ctx, c.Prefix().Stream(schemas.StreamResults))
		if err != nil {
			t.Fatal(err)
		}
		var found []*jetstream.ConsumerInfo
		list := st.ListConsumers(ctx)
		for info := range list.Info() {
			if strings.HasPrefix(info.Name, "count-"+job+"-") {
				found = append(found, info)
			}
		}
		if err := list.Err(); err != nil {
			t.Fatal(err)
		}
		return found
	}
	counters := func() []*jetstream.ConsumerInfo { return countersOf("j1") }
	if found := countersOf("j2"); len(found) != 0 {
		t.Errorf("counting consumers of j2, which has no result: %+v, want none", found)
	}
	if found := counters(); len(found) != 1 || len(found[0].Name) != len("count-j1-")+22 || found[0].Config.DeliverSubject == "" {
		t.Fatalf("counting consumers of j1 = %+v, want one push consumer named count-j1-<nuid>", found)
	}
	if _, err := js.Consumer(ctx, c.Prefix().Stream(schemas.StreamResults), counters()[0].Name); !errors.Is(err, jetstream.ErrNotPullConsumer) {
		t.Errorf("counting consumer as a pull consumer: %v, want ErrNotPullConsumer", err)
	}

	// The end of a job: one final sample, then its counting consumers go.
	end := batchRecord("j1", 10)
	end.State = schemas.Completed
	putRecord(t, c, end)
	got.waitFor(t, "j1", "final sample", func(s schemas.Sample, _ int) bool { return s.State == schemas.Completed })
	bustest.Eventually(t, 10*time.Second, "counting consumers of j1 deleted", func() bool { return len(counters()) == 0 })
	_, nEnd := got.last("j1")
	got.waitFor(t, "j2", "interval sample after j1 ended", func(_ schemas.Sample, n int) bool {
		clk.Step(time.Hour)
		return n > n2
	})
	if _, n := got.last("j1"); n != nEnd {
		t.Errorf("j1 sampled %d times after its final sample", n-nEnd)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v, want nil on cancel", err)
	}
}

// TestUnreadableJobRecordsAreSetAside puts job records the collector cannot
// read in the jobs bucket of a real bus: each is counted and kept as a dead
// letter, byte for byte, and a good job is still sampled.
func TestUnreadableJobRecordsAreSetAside(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := bustest.Client(t, bustest.Server(t))
	got := record(t, c)
	kv, err := c.JetStream().KeyValue(ctx, c.Prefix().Bucket("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(batchRecord("x", 1))
	bad := map[string][]byte{
		"invalid-utf8":   {0xff, 0xfe, '{'},
		"empty":          {},
		"truncated-json": good[:len(good)/2],
		"wrong-type":     []byte(`{"id": 5, "state": "ongoing"}`),
		"other-id":       good,
		"unknown-state":  []byte(`{"id": "unknown-state", "state": "paused"}`),
	}
	for key, data := range bad {
		if _, err := kv.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
	}
	putRecord(t, c, batchRecord("j1", 1))

	col, err := collector.New(collector.Deps{Bus: c}, collector.Config{Interval: time.Hour}, collector.WithClock(testingclock.NewFakeClock(t0)))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- col.Run(ctx) }()
	got.waitFor(t, "j1", "a sample of the good job", func(schemas.Sample, int) bool { return true })
	for key, data := range bad {
		var dead []*schemas.DeadLetter
		bustest.Eventually(t, 10*time.Second, key+" dead-lettered", func() bool {
			dead, err = c.Letters().StoredMalformed(ctx, key)
			return err == nil && len(dead) > 0
		})
		d := dead[0]
		if len(dead) != 1 || d.Reason != schemas.Malformed || d.Raw == nil || string(d.Raw) != string(data) ||
			d.Subject != "$KV.pace_jobs."+key || d.LastError == "" {
			t.Errorf("%s: dead letters %+v, want one keeping the record %q", key, dead, data)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col.Metrics())
	if n := gathered(t, reg, "pace_monitor_collector_malformed_total"); n != float64(len(bad)) {
		t.Errorf("malformed counter = %v, want %d", n, len(bad))
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

// gathered returns the value of the counter name in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestActuationDoesNotSample is the collector's part of issue 19's feedback
// loop: Pace's own actuation, a scaled event and the record update that
// applies it (only replicas and seq change), must not sample the job at once,
// or every decision's effect starts the next decision. A lifecycle event and
// another record change still do. Jobs are sampled one at a time, first
// queued first, so a marker job's sample shows the events before it were
// handled.
func TestActuationDoesNotSample(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := bustest.Client(t, bustest.Server(t))
	got := record(t, c)
	idle, marker := batchRecord("idle", 1), batchRecord("marker", 1)
	putRecord(t, c, idle)
	putRecord(t, c, marker)
	col, err := collector.New(collector.Deps{Bus: c}, collector.Config{Interval: time.Hour, ActivityGap: -1, Concurrency: 1},
		collector.WithClock(testingclock.NewFakeClock(t0)))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- col.Run(ctx) }()
	got.waitFor(t, "idle", "first sample", func(schemas.Sample, int) bool { return true })
	got.waitFor(t, "marker", "first sample", func(schemas.Sample, int) bool { return true })

	for _, tc := range []struct {
		name      string
		actuate   func()
		markerDue func() // a change the marker job is sampled on, handled after actuate's
	}{
		{
			name: "scaled event",
			actuate: func() {
				if _, err := c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: "idle", Type: schemas.EventScaled,
					State: schemas.Ongoing, Replicas: 0, At: t0, Reason: "workers scaled"}); err != nil {
					t.Fatal(err)
				}
			},
			markerDue: func() {
				if err := c.Conn().Publish(c.Prefix().Jobs("marker", schemas.EventStopping), nil); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "record update of the replicas",
			actuate: func() {
				idle.Replicas, idle.Seq = 2, 7
				putRecord(t, c, idle)
			},
			markerDue: func() {
				marker.StopRequested = true
				putRecord(t, c, marker)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, before := got.last("idle")
			_, m := got.last("marker")
			tc.actuate()
			tc.markerDue()
			got.waitFor(t, "marker", "sample on its change", func(_ schemas.Sample, n int) bool { return n > m })
			if _, n := got.last("idle"); n != before {
				t.Errorf("idle sampled %d times on Pace's own actuation, want 0", n-before)
			}
		})
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v, want nil on cancel", err)
	}
}

// An idle job, whose counts do not change, is sampled once more, then,
// quiet (this one has no item; longestWait), every 300 intervals on a phase
// of its own (the first wait is 150 to 450), not at each: a thousand idle
// jobs cost next to nothing. Queue activity samples it at once again.
func TestIdleJobsAreSampledLessOften(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := bustest.Client(t, bustest.Server(t))
	got := record(t, c)
	t0 := time.Now()
	idle := schemas.JobRecord{ID: "idle", Spec: schemas.JobSpec{Mode: schemas.Streaming}.WithDefaults(),
		State: schemas.Ongoing, CreatedAt: t0, StartedAt: t0}
	putRecord(t, c, idle)
	clk := testingclock.NewFakeClock(t0)
	col, err := collector.New(collector.Deps{Bus: c}, collector.Config{Interval: time.Second, ActivityGap: 200 * time.Millisecond},
		collector.WithReplicas(replicas{}), collector.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- col.Run(ctx) }()
	got.waitFor(t, "idle", "first sample", func(schemas.Sample, int) bool { return true })
	_, first := got.last("idle")
	step := func(rounds int) {
		for range rounds {
			clk.Step(time.Second)
			time.Sleep(20 * time.Millisecond) // for the round to run
		}
	}
	step(150) // rounds 1 … 150: a sample at 1 shows no change, the next is due after 151 to 451
	_, n := got.last("idle")
	if n-first > 1 {
		t.Errorf("an idle job was sampled %d times in 150 intervals, want 1", n-first)
	}
	for rounds := 150; ; rounds++ { // its heartbeat, by 451 (later if the loaded test missed ticks)
		if _, now := got.last("idle"); now > n {
			break
		}
		if rounds > 700 {
			t.Fatalf("no heartbeat sample of an idle job in %d intervals, want one every 300", rounds)
		}
		step(1)
	}
	_, n = got.last("idle")
	if err := c.PushItems(ctx, "idle", bus.Items("x")); err != nil {
		t.Fatal(err)
	}
	got.waitFor(t, "idle", "sample on its first item", func(s schemas.Sample, m int) bool {
		clk.Step(200 * time.Millisecond)
		return m > n && s.Pending == 1
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// heldReplicas holds every Count until release is closed, counting the
// calls: a sample that stays in flight.
type heldReplicas struct {
	calls   atomic.Int32
	release chan struct{}
}

func (r *heldReplicas) Count(string) int {
	r.calls.Add(1)
	<-r.release
	return 0
}

// TestASampleInFlightIsNotTakenAgain holds a job's sample in flight while
// rounds pass: no round takes the job again before that sample is done, so
// a slow bus makes the collector sample less often, not twice at once.
func TestASampleInFlightIsNotTakenAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := bustest.Client(t, bustest.Server(t))
	got := record(t, c)
	t0 := time.Now()
	putRecord(t, c, schemas.JobRecord{ID: "slow", Spec: schemas.JobSpec{Mode: schemas.Streaming}.WithDefaults(),
		State: schemas.Ongoing, CreatedAt: t0, StartedAt: t0})
	held := &heldReplicas{release: make(chan struct{})}
	clk := testingclock.NewFakeClock(t0)
	col, err := collector.New(collector.Deps{Bus: c}, collector.Config{Interval: time.Second},
		collector.WithReplicas(held), collector.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- col.Run(ctx) }()
	bustest.Eventually(t, 10*time.Second, "first sample taken", func() bool { return held.calls.Load() == 1 })
	for range 20 { // rounds while the first sample is held
		clk.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	if n := held.calls.Load(); n != 1 {
		t.Errorf("job sampled %d times at once, want 1", n)
	}
	close(held.release)
	got.waitFor(t, "slow", "the held sample", func(schemas.Sample, int) bool { return true })
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestStreamingResultsCountOnlyQueuedItems checks a streaming job's done
// count stops at the items its ledger entered: results forged for ids it
// never queued move neither its progress nor its rates before the manager
// sets them aside (the sample counts them apart, for the manager), whether results and ledger entries are counted from the
// streams' subjects or by counting consumers.
func TestStreamingResultsCountOnlyQueuedItems(t *testing.T) {
	t.Parallel()
	for _, from := range []int{1000, 1} {
		t.Run(fmt.Sprintf("consumers from %d", from), func(t *testing.T) {
			ctx := context.Background()
			c := bustest.Client(t, bustest.Server(t))
			bustest.KeepLedger(t, c)
			rec := streamingJobWithAResult(t, c, t0, "a", "b", "c")
			for _, id := range []string{"forged1", "forged2", "forged3"} {
				bustest.Publish(t, c, c.Prefix().Results("s", id), &schemas.Result{Job: "s", ItemID: id, Output: "forged"})
			}
			col, err := collector.New(collector.Deps{Bus: c}, collector.Config{CountConsumerFrom: from})
			if err != nil {
				t.Fatal(err)
			}
			var s *schemas.Sample
			bustest.Eventually(t, 5*time.Second, "the ledger enters the three items", func() bool {
				s, err = col.Sample(ctx, &rec)
				if err != nil {
					t.Fatal(err)
				}
				return s.Pending == 2 && s.Published >= 3
			})
			if s.Done != 1 || s.Published != 3 || s.Unqueued != 3 {
				t.Errorf("sample done = %d, published = %d, unqueued = %d; want 1, 3 and 3 (the three forged results count for nothing, and are to set aside)",
					s.Done, s.Published, s.Unqueued)
			}
		})
	}
}

// TestLedgerEntrySamplesAStreamingJob: a streaming job's done count is
// capped by its ledger, which may enter items after their results came; the
// ledger's entries are queue activity, so the job is sampled again once
// they come, not at its quiet heartbeat minutes later.
func TestLedgerEntrySamplesAStreamingJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := bustest.Client(t, bustest.Server(t))
	got := record(t, c)
	t0 := time.Now()
	streamingJobWithAResult(t, c, t0, "a")
	clk := testingclock.NewFakeClock(t0)
	col, err := collector.New(collector.Deps{Bus: c}, collector.Config{Interval: time.Second, ActivityGap: 200 * time.Millisecond},
		collector.WithReplicas(replicas{}), collector.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- col.Run(ctx) }()
	got.waitFor(t, "s", "a sample with the result not entered yet", func(s schemas.Sample, _ int) bool {
		return s.Done == 0 && s.Pending+s.InFlight == 0
	})
	for range 5 { // the job's counts stand still: it goes quiet, its heartbeat 300 rounds away
		clk.Step(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	_, n := got.last("s")
	bustest.KeepLedger(t, c) // enters the item now, after its result
	steps := 0
	got.waitFor(t, "s", "a sample counting the result once the ledger entered its item", func(s schemas.Sample, m int) bool {
		clk.Step(200 * time.Millisecond)
		steps++
		return m > n && s.Done == 1
	})
	if steps > 100 { // 20 rounds: far from the heartbeat's 300
		t.Errorf("the entry was sampled after %d activity gaps, want the next few", steps)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// streamingJobWithAResult records the streaming job "s", started at t0,
// pushes items to it and works the first one as a worker would: its result
// stored, then its delivery acknowledged. It returns the job's record.
func streamingJobWithAResult(t *testing.T, c *bus.Client, t0 time.Time, items ...string) schemas.JobRecord {
	t.Helper()
	ctx := context.Background()
	rec := schemas.JobRecord{ID: "s", Spec: schemas.JobSpec{Mode: schemas.Streaming}.WithDefaults(),
		State: schemas.Ongoing, CreatedAt: t0, StartedAt: t0}
	putRecord(t, c, rec)
	if err := c.Queues().EnsureWork(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	if err := c.PushItems(ctx, "s", bus.Items(items...)); err != nil {
		t.Fatal(err)
	}
	work, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamWork), "work-s")
	if err != nil {
		t.Fatal(err)
	}
	m, err := work.Next()
	if err != nil {
		t.Fatal(err)
	}
	workItem(ctx, t, c, "s", m)
	return rec
}

// workItem works job's item m as a worker does: its result, then its ack.
func workItem(ctx context.Context, t *testing.T, c *bus.Client, job string, m jetstream.Msg) {
	t.Helper()
	it, err := bus.Decode[schemas.WorkItem](m.Data(), m.Headers())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PublishResult(ctx, &schemas.Result{Job: job, ItemID: it.ID, Output: "ok"}); err != nil {
		t.Fatal(err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
}
