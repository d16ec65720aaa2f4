package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

// hostileCheck is how often the manager checks jobs in the hostile-tenant
// tests: often, so that a job's time to completion is mostly its own work
// and a delay caused by another job stands out against it.
const hostileCheck = 100 * time.Millisecond

// TestForgedResultsStallNoJob plays alice as a hostile tenant with nats.go
// alone, holding her job's token (as her item command would, reading its
// worker's PACE_TOKEN): while bob's 3-item jobs run, she publishes results
// for item ids her job never queued, one every 50 ms. The manager, as
// pace-manager of auth.conf, sets each aside once (one never_queued letter
// saying why, the result deleted) without a refusal from the server; bob's
// jobs take no longer than in a quiet baseline measured in the same test
// (a ratio of medians, not a wall-clock bound); alice's job then completes on its
// real items, and no letter is written twice.
func TestForgedResultsStallNoJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, watcher := provisioned(t, ctx)
	b.calloutWith(t, manager.Config{Interval: hostileCheck, StraySweep: hostileCheck})
	alice := connectAs(t, ctx, b.url, tokenLogin("alice", aliceToken))
	bob := connectAs(t, ctx, b.url, tokenLogin("bob", bobToken))

	const runs = 5
	quiet := make([]time.Duration, runs)
	for i := range quiet {
		quiet[i] = b.runJob(t, ctx, bob, watcher)
	}

	aliceJob := b.submit(t, ctx, alice, `{"deadline":"10m","workload":{"items":["a","b","c"]}}`)
	attacker := b.attacker(t, b.jobs.Mint(aliceJob))
	var (
		mu     sync.Mutex
		forged []string
	)
	attack, stop := context.WithCancel(ctx)
	attacked := make(chan struct{})
	go func() {
		defer close(attacked)
		for i := 0; attack.Err() == nil; i++ {
			id := fmt.Sprintf("forged%d", i)
			body := fmt.Sprintf(`{"job":%q,"item_id":%q,"output":"forged","finished_at":"2026-01-02T03:04:05Z"}`, aliceJob, id)
			if _, err := attacker.Publish(attack, schemas.DefaultPrefix.Results(aliceJob, id), []byte(body)); err != nil {
				if attack.Err() == nil {
					t.Errorf("forged result %s: %v", id, err)
				}
				return
			}
			mu.Lock()
			forged = append(forged, id)
			mu.Unlock()
			select {
			case <-attack.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	loud := make([]time.Duration, runs)
	for i := range loud {
		loud[i] = b.runJob(t, ctx, bob, watcher)
	}
	stop()
	<-attacked

	q, l := median(quiet), median(loud)
	t.Logf("bob's 3-item job: %v quiet, %v while alice forged %d results (median of %d; ratio %.2f)",
		q, l, len(forged), runs, float64(l)/float64(q))
	// A job stalled behind another's check waits that check's timeout
	// (10 s), a hundred times the quiet figure; sharing two cores with the
	// attacker and the set-asides costs a few times it.
	if l > 10*q {
		t.Errorf("bob's jobs took %v while alice forged results, against %v quiet: over 10 times as long", loud, quiet)
	}

	b.work(t, ctx, aliceJob)
	waitState(t, ctx, watcher, aliceJob, schemas.Completed)
	letters := func() map[string]int {
		byItem := map[string]int{}
		for l, err := range watcher.Letters().List(ctx, bus.DeadItems, aliceJob, false) {
			if err != nil {
				t.Fatal(err)
			}
			if l.Reason != schemas.NeverQueued || !strings.Contains(l.LastError, "has no item") {
				t.Errorf("letter %+v, want never_queued saying the job has no such item", l.DeadLetter)
			}
			byItem[l.ItemID]++
		}
		return byItem
	}
	bustest.Eventually(t, 2*time.Minute, "a letter for each forged result", func() bool {
		return len(letters()) == len(forged)
	})
	// Passes after the job's end set nothing aside again.
	time.Sleep(10 * hostileCheck)
	got := letters()
	for _, id := range forged {
		if got[id] != 1 {
			t.Errorf("forged result %s has %d letters, want 1", id, got[id])
		}
	}
	if rec, err := watcher.Jobs().Status(ctx, aliceJob); err != nil || !strings.Contains(rec.Reason, "all 3 items") {
		t.Errorf("alice's job: %+v (%v), want completed on its 3 items", rec, err)
	}
	if n, err := watcher.Outputs().ResultCount(ctx, aliceJob); err != nil || n != 3 {
		t.Errorf("alice's job holds %d results (%v), want its 3 real ones", n, err)
	}
}

// TestLateItemsAreRefusedAtOnce pushes, as bob, an item to his completed
// job and an item reusing the id of one of its results: each is set aside
// with a refused letter saying why, the first as soon as the next stray
// sweep (the figure is logged: the goal is under 5 s with the default 2 s
// sweep).
func TestLateItemsAreRefusedAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, watcher := provisioned(t, ctx)
	b.callout(t) // the default settings: a sweep every 2 s
	bob := connectAs(t, ctx, b.url, tokenLogin("bob", bobToken))
	job, stop := b.completeJob(t, ctx, bob, watcher)
	// The job's worker stops, as the actuator stops a finished job's: one
	// still fetching could take a pushed item before the manager removes
	// the job's work consumer, and give it a result.
	stop()

	pusher := b.attacker(t, bobToken) // nats.go alone: the SDK would not push to a finished job
	start := time.Now()
	for _, id := range []string{"late", schemas.WorkloadItemID(1)} {
		body := fmt.Sprintf(`{"id":%q,"job":%q,"payload":"x"}`, id, job)
		if _, err := pusher.Publish(ctx, schemas.DefaultPrefix.Work(job), []byte(body)); err != nil {
			t.Fatalf("push %s: %v", id, err)
		}
	}
	var took time.Duration
	want := map[string]string{"late": "job completed", schemas.WorkloadItemID(1): "already has a result"}
	bustest.Eventually(t, 2*time.Minute, "both items refused", func() bool {
		got := map[string]string{}
		for l, err := range watcher.Letters().List(ctx, bus.DeadItems, job, false) {
			if err != nil {
				t.Fatal(err)
			}
			if l.Reason == schemas.RefusedItem {
				got[l.ItemID] = l.LastError
			}
		}
		if got["late"] != "" && took == 0 {
			took = time.Since(start)
		}
		for id, why := range want {
			if !strings.Contains(got[id], why) {
				return false
			}
		}
		return true
	})
	t.Logf("an item pushed to a completed job was refused after %v", took)
	if n, err := watcher.Outputs().ResultCount(ctx, job); err != nil || n != 3 {
		t.Errorf("the job holds %d results (%v), want its 3", n, err)
	}
}

// TestOneJobCannotFillTheWorkStream plays alice as a hostile tenant with
// nats.go alone: she pushes to her streaming job, which no worker serves,
// far more items than a job may hold. The server refuses those beyond the
// bound to her, and only to her: bob's pushes, made after, are accepted
// and his job gets every result.
func TestOneJobCannotFillTheWorkStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const bound = 40
	b, watcher := provisionedWith(t, ctx, bus.Limits{QueuedItemsPerJob: bound})
	b.callout(t)
	alice := connectAs(t, ctx, b.url, tokenLogin("alice", aliceToken))
	bob := connectAs(t, ctx, b.url, tokenLogin("bob", bobToken))
	aliceJob := b.submit(t, ctx, alice, `{"mode":"streaming"}`)
	pusher := b.attacker(t, aliceToken)
	accepted, refused := 0, 0
	for i := range 3 * bound {
		body := fmt.Sprintf(`{"id":"flood%d","job":%q,"payload":"x"}`, i, aliceJob)
		err := publishUntilAnswered(t, ctx, pusher, schemas.DefaultPrefix.Work(aliceJob), fmt.Sprintf("flood%d", i), []byte(body))
		switch {
		case err == nil:
			accepted++
		case strings.Contains(err.Error(), "maximum messages per subject"):
			refused++
		default:
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if accepted != bound || refused != 2*bound {
		t.Errorf("alice's pushes: %d accepted, %d refused; want %d and %d", accepted, refused, bound, 2*bound)
	}

	bobJob := b.submit(t, ctx, bob, `{"mode":"streaming"}`)
	items := make([]schemas.WorkItem, 10)
	for i := range items {
		items[i] = schemas.WorkItem{ID: fmt.Sprintf("bob%d", i), Payload: "hi"}
	}
	if err := bob.PushItems(ctx, bobJob, items); err != nil {
		t.Fatalf("bob's pushes, while alice's job is full: %v", err)
	}
	defer b.work(t, ctx, bobJob)()
	bustest.Eventually(t, 2*time.Minute, "bob's 10 results", func() bool {
		n, err := watcher.Outputs().ResultCount(ctx, bobJob)
		return err == nil && n == 10
	})
}

// TestOneUserCannotFillAnothersWorkStream plays alice as a hostile tenant
// with nats.go alone, on a bus where each user's jobs have a work stream
// of their own (Limits.QueuedBytesPerUser): she pushes large items to two
// streaming jobs, which no worker serves, until the server refuses them.
// It refuses them once her stream holds her quota, to both of her jobs
// alike, and to no one else: bob's pushes, made after, are accepted and
// his job gets every result. Once her job has ended, a push to it is
// refused at once: no stream takes its subject any more.
func TestOneUserCannotFillAnothersWorkStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const quota, size = 256 << 10, 8 << 10
	b, watcher := provisionedWith(t, ctx, bus.Limits{QueuedBytesPerUser: quota})
	b.callout(t)
	alice := connectAs(t, ctx, b.url, tokenLogin("alice", aliceToken))
	bob := connectAs(t, ctx, b.url, tokenLogin("bob", bobToken))
	aliceJobs := []string{b.submit(t, ctx, alice, `{"mode":"streaming"}`), b.submit(t, ctx, alice, `{"mode":"streaming"}`)}
	pusher := b.attacker(t, aliceToken)
	payload := strings.Repeat("x", size)
	accepted := bustest.FillQuota(t, quota, size, func(i int) error {
		job := aliceJobs[i%2]
		body := fmt.Sprintf(`{"id":"flood%d","job":%q,"payload":%q}`, i, job, payload)
		return publishUntilAnswered(t, ctx, pusher, schemas.DefaultPrefix.Work(job), fmt.Sprintf("flood%d", i), []byte(body))
	})
	t.Logf("alice's pushes of %d bytes to two jobs: %d accepted (%d bytes of payload), then refused", size, accepted, accepted*size)

	bobJob := b.submit(t, ctx, bob, `{"mode":"streaming"}`)
	items := make([]schemas.WorkItem, 10)
	for i := range items {
		items[i] = schemas.WorkItem{ID: fmt.Sprintf("bob%d", i), Payload: payload}
	}
	if err := bob.PushItems(ctx, bobJob, items); err != nil {
		t.Fatalf("bob's pushes, while alice's stream is full: %v", err)
	}
	defer b.work(t, ctx, bobJob)()
	bustest.Eventually(t, 2*time.Minute, "bob's 10 results", func() bool {
		n, err := watcher.Outputs().ResultCount(ctx, bobJob)
		return err == nil && n == 10
	})

	if err := alice.Jobs().Terminate(ctx, aliceJobs[0]); err != nil {
		t.Fatal(err)
	}
	waitState(t, ctx, watcher, aliceJobs[0], schemas.Terminated)
	bustest.Eventually(t, time.Minute, "a push to alice's ended job refused", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := pusher.Publish(pctx, schemas.DefaultPrefix.Work(aliceJobs[0]), []byte(`{"id":"late","payload":"x"}`))
		return errors.Is(err, jetstream.ErrNoStreamResponse)
	})
}

// TestAReaderIsItsAskersAlone plays alice as a hostile tenant with nats.go
// alone, knowing the name of the consumer the manager (as auth.conf's
// pace-manager) made for bob to read his job's results: the server refuses
// her fetch, info and delete of it on $JS.API and through bob's reader
// prefix; through her own, the manager answers as if it did not exist.
// Bob then reads every result through it, and with the SDK his results
// and his job's log.
func TestAReaderIsItsAskersAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, watcher := provisioned(t, ctx)
	b.callout(t)
	bob := connectAs(t, ctx, b.url, tokenLogin("bob", bobToken))
	job, _ := b.completeJob(t, ctx, bob, watcher)

	bobNC, err := nats.Connect(b.url, tokenLogin("bob", bobToken).nats()...)
	if err != nil {
		t.Fatal(err)
	}
	defer bobNC.Close()
	req := nats.NewMsg(schemas.DefaultPrefix.Control("read"))
	req.Header.Set("Authorization", "Bearer "+bobToken)
	req.Data = fmt.Appendf(nil, `{"stream":"PACE_RESULTS","filter_subject":%q}`, schemas.DefaultPrefix.JobResults(job))
	resp, err := bobNC.RequestMsgWithContext(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var read bus.ReadReply
	if err := json.Unmarshal(resp.Data, &read); err != nil || read.Consumer == "" {
		t.Fatalf("bob's reader: %s (%v)", resp.Data, err)
	}

	for _, api := range []string{"$JS.API", read.APIPrefix} {
		var pub []string
		for _, op := range []string{"MSG.NEXT", "INFO", "DELETE"} {
			pub = append(pub, api+".CONSUMER."+op+".PACE_RESULTS."+read.Consumer)
		}
		checkDenied(t, b.url, tokenLogin("alice", aliceToken), pub, nil)
	}
	aliceNC, err := nats.Connect(b.url, tokenLogin("alice", aliceToken).nats()...)
	if err != nil {
		t.Fatal(err)
	}
	defer aliceNC.Close()
	own := bus.ReaderAPIPrefix(schemas.DefaultPrefix, bus.CallerID(aliceToken))
	aliceJS, err := jetstream.NewWithAPIPrefix(aliceNC, own)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aliceJS.Consumer(ctx, read.Stream, read.Consumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("alice's info of bob's reader: %v, want consumer not found", err)
	}
	if err := aliceJS.DeleteConsumer(ctx, read.Stream, read.Consumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("alice's delete of bob's reader: %v, want consumer not found", err)
	}
	inbox := aliceNC.NewInbox()
	fetched, err := aliceNC.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := aliceNC.PublishRequest(own+".CONSUMER.MSG.NEXT."+read.Stream+"."+read.Consumer, inbox,
		[]byte(`{"batch":10,"expires":1000000000}`)); err != nil {
		t.Fatal(err)
	}
	if msg, err := fetched.NextMsg(30 * time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("alice's fetch from bob's reader: %v %v, want no responders", msg, err)
	}

	bobJS, err := jetstream.NewWithAPIPrefix(bobNC, read.APIPrefix)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := bobJS.Consumer(ctx, read.Stream, read.Consumer)
	if err != nil {
		t.Fatalf("bob's reader after alice's attempts: %v", err)
	}
	batch, err := reader.FetchNoWait(10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 3 {
		t.Errorf("bob read %d results through his reader (%v), want his 3", n, batch.Error())
	}
	if got, err := bob.Outputs().StoredResults(ctx, job); err != nil || len(got) != 3 {
		t.Errorf("bob's results with the SDK: %d (%v), want 3", len(got), err)
	}
	lines := 0
	for _, err := range bob.Outputs().Logs(ctx, job, false) {
		if err != nil {
			t.Fatalf("bob's log: %v", err)
		}
		lines++
	}
	if lines == 0 {
		t.Error("bob's job has no log lines")
	}
}

// submit submits doc as c's user and returns the job's id.
func (b *authBus) submit(t *testing.T, ctx context.Context, c *bus.Client, doc string) string {
	t.Helper()
	job, err := c.Jobs().Submit(ctx, []byte(doc))
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return job
}

// work runs a worker of job, with its job token, until the test ends.
func (b *authBus) work(t *testing.T, ctx context.Context, job string) (stop func()) {
	t.Helper()
	c := connectAs(t, ctx, b.url, tokenLogin("worker of "+job, b.jobs.Mint(job)))
	w, err := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return strings.ToUpper(it.Payload), nil
	}, bus.WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker of %s: %v", job, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// provisioned starts an authenticated server and provisions the bus as
// the manager's user, whose connection (the watcher) it returns.
func provisioned(t *testing.T, ctx context.Context) (*authBus, *bus.Client) {
	t.Helper()
	return provisionedWith(t, ctx, bus.Limits{})
}

// provisionedWith is provisioned with the bus limits l.
func provisionedWith(t *testing.T, ctx context.Context, l bus.Limits) (*authBus, *bus.Client) {
	t.Helper()
	b := authServer(t)
	watcher := connect(t, ctx, b.url, "manager")
	if err := watcher.Provision(ctx, l); err != nil {
		t.Fatal(err)
	}
	return b, watcher
}

// completeJob submits a 3-item job as c's user and works it until the
// watcher sees it completed; stop stops its worker.
func (b *authBus) completeJob(t *testing.T, ctx context.Context, c, watcher *bus.Client) (job string, stop func()) {
	t.Helper()
	job = b.submit(t, ctx, c, `{"deadline":"10m","workload":{"items":["a","b","c"]}}`)
	stop = b.work(t, ctx, job)
	waitState(t, ctx, watcher, job, schemas.Completed)
	return job, stop
}

// runJob completes a 3-item job as c's user and returns how long it took
// from submission to completion, as the watcher saw.
func (b *authBus) runJob(t *testing.T, ctx context.Context, c, watcher *bus.Client) time.Duration {
	t.Helper()
	start := time.Now()
	b.completeJob(t, ctx, c, watcher)
	return time.Since(start)
}

// attacker is a connection of nats.go alone with token (a tenant's, or a
// job's, as a worker's item command could read it).
func (b *authBus) attacker(t *testing.T, token string) jetstream.JetStream {
	t.Helper()
	_, js := bustest.Raw(t, b.url, nats.Token(token), nats.CustomInboxPrefix(bus.InboxPrefix(token)))
	return js
}

// publishUntilAnswered publishes body with message id id, again while no
// answer comes within 10 s: a busy machine may lose an answer (a client
// reconnecting), and the id makes a retry of a stored message a duplicate.
// It returns the answer's error.
func publishUntilAnswered(t *testing.T, ctx context.Context, js jetstream.JetStream, subject, id string, body []byte) error {
	t.Helper()
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := js.Publish(pctx, subject, body, jetstream.WithMsgID(id))
		cancel()
		lost := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		if !lost || ctx.Err() != nil {
			return err
		}
		t.Logf("publish %s: no answer within 10 s (%v); again", id, err)
	}
}

// waitState waits for job to reach state, polling its record often.
func waitState(t *testing.T, ctx context.Context, c *bus.Client, job string, state schemas.JobState) {
	t.Helper()
	var last schemas.JobState
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(2 * time.Minute)
	for {
		rec, err := c.Jobs().Status(ctx, job)
		if err == nil {
			if last = rec.State; last == state {
				return
			}
		}
		select {
		case <-tick.C:
		case <-limit:
			t.Fatalf("job %s is %s, want %s", job, last, state)
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
