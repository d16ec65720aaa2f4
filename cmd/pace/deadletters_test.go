package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// deadLetters runs `pace dead-letters args... --nats url` in-process and
// returns its stdout, failing the test unless it exits with want.
func deadLetters(t *testing.T, url string, want int, args ...string) string {
	t.Helper()
	out, errOut, code := runPace(t, append(append([]string{"dead-letters"}, args...), "--nats", url)...)
	if code != want {
		t.Fatalf("pace dead-letters %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, want, errOut)
	}
	return out
}

// listLetters returns the -o json lines of `pace dead-letters list args...`.
func listLetters(t *testing.T, url string, args ...string) []letterLine {
	t.Helper()
	var out []letterLine
	for line := range strings.Lines(deadLetters(t, url, exitOK, append([]string{"list", "-o", "json"}, args...)...)) {
		var l letterLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("list line %q: %v", line, err)
		}
		out = append(out, l)
	}
	return out
}

func TestDeadLetterNonUTF8RoundTrip(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	url := s.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A sample a stage could not read, kept as SetAside keeps it: bytes
	// that are not UTF-8, a NUL and a terminal escape.
	const job = "sensor"
	body := []byte{0xff, 0xfe, 'a', 0x00, 0xc3, '"', '\\', '\n', 0x1b, '['}
	subject := c.Prefix().Metrics(job, schemas.RawMetrics)
	header := nats.Header{"X-Case": {"bytes"}, schemas.HeaderMsgID: {"sample-1"}}
	d := bus.MalformedLetter(job, subject, body, header, errors.New("invalid character 'ÿ'"), time.Now())
	d.Sequence = 7
	if err := c.Letters().Publish(ctx, c.Prefix().Metrics(job, schemas.DeadMetrics), d, ""); err != nil {
		t.Fatal(err)
	}

	letters := listLetters(t, url, job)
	if len(letters) != 1 || !strings.HasPrefix(letters[0].Seq, "metrics:") || letters[0].Size != len(body) ||
		!bytes.Equal(letters[0].Raw, body) {
		t.Fatalf("list = %+v, want one metrics: letter of %d bytes keeping the body", letters, len(body))
	}
	seq := letters[0].Seq
	if table := deadLetters(t, url, exitOK, "list"); !strings.Contains(table, seq) || !strings.Contains(table, "malformed") {
		t.Errorf("table lacks %s, malformed:\n%s", seq, table)
	}
	if other := listLetters(t, url, "other-job"); len(other) != 0 {
		t.Errorf("letters of other-job = %+v, want none", other)
	}

	if raw := deadLetters(t, url, exitOK, "show", seq, "--raw"); raw != string(body) {
		t.Errorf("show --raw = %q, want %q exactly", raw, body)
	}
	text := deadLetters(t, url, exitOK, "show", seq)
	if !utf8.ValidString(text) || strings.ContainsRune(text, 0x1b) || !strings.Contains(text, "ff fe 61 00") ||
		!strings.Contains(text, "X-Case: bytes") {
		t.Errorf("show printed unsafe text or no hex dump and headers:\n%s", text)
	}
	var shown schemas.DeadLetter
	if err := json.Unmarshal([]byte(deadLetters(t, url, exitOK, "show", seq, "-o", "json")), &shown); err != nil ||
		!bytes.Equal(shown.Raw, body) || shown.Subject != subject {
		t.Errorf("show -o json = %+v (%v), want the body and subject", shown, err)
	}

	if out := deadLetters(t, url, exitOK, "redrive", seq); !strings.Contains(out, "redriven "+seq) ||
		!strings.Contains(out, "redriven 1 of 1") {
		t.Fatalf("redrive said %q", out)
	}
	st, err := c.JetStream().Stream(ctx, c.Prefix().Stream(schemas.StreamMetrics))
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatalf("redriven message on %s: %v", subject, err)
	}
	if !bytes.Equal(again.Data, body) || again.Header.Get("X-Case") != "bytes" ||
		again.Header.Get(schemas.HeaderMsgID) != "pace-redrive/PACE_METRICS/"+strings.TrimPrefix(seq, "metrics:") {
		t.Errorf("redriven %q with %v, want %q with X-Case and the letter as Nats-Msg-Id", again.Data, again.Header, body)
	}
	// The letter is gone: redriving it again sends nothing.
	if _, errOut, code := runPace(t, "dead-letters", "redrive", seq, "--nats", url); code != exitRejected ||
		!strings.Contains(errOut, "nothing was redriven") {
		t.Errorf("second redrive of %s: exit %d, %q; want it unknown", seq, code, errOut)
	}

	// Sequences holding nothing (never used, or a redriven letter), or a
	// message that is no dead letter (the redriven sample), are not letters.
	for _, id := range []string{"5", seq, fmt.Sprintf("metrics:%d", again.Sequence)} {
		_, errOut, code := runPace(t, "dead-letters", "show", id, "--nats", url)
		if code != exitRejected || !strings.Contains(errOut, "SEQ "+id) || !strings.Contains(errOut, "no dead letter") {
			t.Errorf("show %s: exit %d, %q; want %d naming it", id, code, errOut, exitRejected)
		}
	}
}

// TestDeadLetterLargeBodyRoundTrip keeps a malformed message too large for
// its letter, as a stage does: the body goes to the dead-letter object
// store, list gives its size, show --raw prints its exact bytes (and -o
// json its base64), and redrive sends it back and removes the object.
func TestDeadLetterLargeBodyRoundTrip(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	url := s.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const job = "bulky"
	body := bytes.Repeat([]byte{0xff, 0x00, 0x1b, 'x'}, 900<<10/4) // base64 would not fit 1 MiB
	subject := c.Prefix().Metrics(job, schemas.ProgressMetrics)
	d := bus.MalformedLetter(job, subject, body, nats.Header{"X-Case": {"large"}}, errors.New("unreadable"), time.Now())
	if err := c.Letters().Publish(ctx, c.Prefix().Metrics(job, schemas.DeadMetrics), d, ""); err != nil {
		t.Fatal(err)
	}
	letters := listLetters(t, url, job)
	if len(letters) != 1 || letters[0].Size != len(body) || letters[0].Raw != nil || letters[0].RawObject == "" {
		t.Fatalf("list = %+v, want one letter of %d bytes naming its object", letters, len(body))
	}
	seq := letters[0].Seq

	if raw := deadLetters(t, url, exitOK, "show", seq, "--raw"); raw != string(body) {
		t.Errorf("show --raw printed %d bytes, want the %d of the body exactly", len(raw), len(body))
	}
	if text := deadLetters(t, url, exitOK, "show", seq); !strings.Contains(text, "body object: "+letters[0].RawObject) ||
		!strings.Contains(text, "ff 00 1b 78") || strings.ContainsRune(text, 0x1b) {
		t.Errorf("show lacks the object or a safe hex dump:\n%.400s", text)
	}
	var shown schemas.DeadLetter
	if err := json.Unmarshal([]byte(deadLetters(t, url, exitOK, "show", seq, "-o", "json")), &shown); err != nil ||
		!bytes.Equal(shown.Raw, body) {
		t.Errorf("show -o json: %d bytes of raw (%v), want the body", len(shown.Raw), err)
	}

	if out := deadLetters(t, url, exitOK, "redrive", seq); !strings.Contains(out, "redriven 1 of 1") {
		t.Fatalf("redrive said %q", out)
	}
	st, err := c.JetStream().Stream(ctx, c.Prefix().Stream(schemas.StreamMetrics))
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil || !bytes.Equal(again.Data, body) || again.Header.Get("X-Case") != "large" {
		t.Fatalf("redriven message on %s: %v; want the body byte for byte", subject, err)
	}
	obs, err := c.JetStream().ObjectStore(ctx, "pace_dead_letters")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.GetInfo(ctx, letters[0].RawObject); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the letter's object after the redrive: err = %v, want ErrObjectNotFound", err)
	}
}

func TestDeadLetterRedriveGivesExactlyOneResult(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	url := s.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bustest.Run(t, c.Letters().Move)
	bustest.KeepLedger(t, c)

	const job = "flaky"
	if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, MaxDeliveries: 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.PushItems(ctx, job, bus.Items("x")); err != nil {
		t.Fatal(err)
	}
	var fixed atomic.Bool
	var runs atomic.Int32 // successful runs of the item
	w, err := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		if !fixed.Load() {
			return "", errors.New("not yet")
		}
		runs.Add(1)
		return "ok " + it.Payload, nil
	}, bus.WithRetryDelay(20*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, w.Run)

	var letters []letterLine
	bustest.Eventually(t, 30*time.Second, "the item's dead letter", func() bool {
		letters = listLetters(t, url, job)
		return len(letters) > 0
	})
	seq := letters[0].Seq
	if len(letters) != 1 || letters[0].Reason != schemas.MaxDeliveries || strings.Contains(seq, ":") {
		t.Fatalf("letters = %+v, want one max_deliveries letter in PACE_DEAD", letters)
	}

	// An unknown SEQ beside a known one redrives nothing.
	_, errOut, code := runPace(t, "dead-letters", "redrive", seq, "99", "--nats", url)
	if code != exitRejected || !strings.Contains(errOut, "SEQ 99") || !strings.Contains(errOut, "nothing was redriven") {
		t.Fatalf("redrive with an unknown SEQ: exit %d, %q", code, errOut)
	}

	fixed.Store(true)
	if out := deadLetters(t, url, exitOK, "redrive", seq, seq); !strings.Contains(out, "redriven 1 of 1") {
		t.Fatalf("redrive of one letter named twice said %q", out)
	}
	bustest.Eventually(t, 30*time.Second, "the redriven item's result, and no work left", func() bool {
		rec, err := c.Jobs().Status(ctx, job)
		if err != nil {
			return false
		}
		ws, err := c.JobWork(ctx, rec)
		return err == nil && ws.Results == 1 && ws.Pending == 0 && ws.InFlight == 0
	})
	// The letter went with the redrive. One left beside the item's result
	// (a redrive interrupted before it removed the letter) is not sent: it
	// is removed.
	if letters := listLetters(t, url, job); len(letters) != 0 {
		t.Errorf("letters after the redrive = %+v, want none", letters)
	}
	stale := &schemas.DeadLetter{Job: job, ItemID: letters[0].ItemID, Reason: schemas.MaxDeliveries, Payload: "x", At: time.Now()}
	if err := c.Letters().Publish(ctx, c.Prefix().Dead(job), stale, ""); err != nil {
		t.Fatal(err)
	}
	if out := deadLetters(t, url, exitOK, "redrive", "--job", job); !strings.Contains(out, "already has a result; letter removed") ||
		!strings.Contains(out, "redriven 0 of 1") {
		t.Errorf("redrive --job of a stale letter said %q", out)
	}
	if letters := listLetters(t, url, job); len(letters) != 0 {
		t.Errorf("letters after redriving the stale one = %+v, want none", letters)
	}
	results, err := c.Outputs().StoredResults(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Output != "ok x" || runs.Load() != 1 {
		t.Errorf("results = %+v after %d successful runs, want exactly one, ok x", results, runs.Load())
	}
}

// lockedBuffer is a bytes.Buffer safe for a command writing while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestDeadLetterListFollow(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"dead-letters", "list", "--follow", "--nats", s.ClientURL()}, strings.NewReader(""), &out, &errOut)
	}()
	defer func() {
		cancel()
		if got := <-code; got != exitOK {
			t.Errorf("list --follow: exit %d after an interrupt, want 0; stderr:\n%s", got, errOut.String())
		}
	}()
	for i, job := range []string{"late-item", "late-sample"} {
		d := bus.MalformedLetter(job, "pace.work."+job, []byte("?"), nil, errors.New("unreadable"), time.Now())
		subject := c.Prefix().Dead(job)
		if i == 1 {
			subject = c.Prefix().Metrics(job, schemas.DeadMetrics)
		}
		if err := c.Letters().Publish(ctx, subject, d, ""); err != nil {
			t.Fatal(err)
		}
		bustest.Eventually(t, 30*time.Second, "the new letter of "+job, func() bool { return strings.Contains(out.String(), job) })
	}
}

func TestDeadLetterUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "needs a subcommand"},
		{[]string{"show"}, "missing SEQ"},
		{[]string{"show", "abc"}, `SEQ "abc"`},
		{[]string{"show", "metrics:0"}, `SEQ "metrics:0"`},
		{[]string{"show", "work:3"}, `SEQ "work:3"`},
		{[]string{"show", "1", "--raw", "-o", "json"}, "--raw"},
		{[]string{"list", "a", "b"}, "at most one JOB"},
		{[]string{"list", "bad.job"}, `JOB "bad.job"`},
		{[]string{"list", "-o", "yaml"}, "--output"},
		{[]string{"redrive"}, "--job JOB"},
		{[]string{"redrive", "1", "--all"}, "exactly one of"},
		{[]string{"redrive", "--job", "a b"}, `--job "a b"`},
		{[]string{"redrive", "1", "x"}, `SEQ "x"`},
		{[]string{"delete"}, "missing SEQ"},
		{[]string{"delete", "1", "2"}, "SEQ"},
		{[]string{"delete", "dead:x"}, `SEQ "dead:x"`},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			_, errOut, code := runPace(t, append([]string{"dead-letters"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d naming %s", code, errOut, exitUsage, tc.want)
			}
		})
	}
	for _, sub := range []string{"list", "show", "redrive", "delete"} {
		out, _, code := runPace(t, "dead-letters", sub, "--help")
		if code != exitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "pace dead-letters "+sub) ||
			!strings.Contains(out, "PACE_NATS_URL") {
			t.Errorf("dead-letters %s --help: exit %d, no example or env:\n%s", sub, code, out)
		}
	}
}

// TestDeadLetterMissingObject loses the object of a letter's large body:
// 'show' still prints the letter and says its message is unavailable,
// 'redrive' fails, and 'delete' drops the letter, as it drops a stored
// message that is no readable letter at all.
func TestDeadLetterMissingObject(t *testing.T) {
	t.Parallel()
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	url := s.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const job = "lost"
	body := bytes.Repeat([]byte{0xff, 'x'}, 900<<10/2)
	d := bus.MalformedLetter(job, c.Prefix().Metrics(job, schemas.RawMetrics), body, nil, errors.New("unreadable"), time.Now())
	if err := c.Letters().Publish(ctx, c.Prefix().Metrics(job, schemas.DeadMetrics), d, ""); err != nil {
		t.Fatal(err)
	}
	letters := listLetters(t, url, job)
	if len(letters) != 1 || letters[0].RawObject == "" {
		t.Fatalf("list = %+v, want one letter naming its object", letters)
	}
	seq := letters[0].Seq
	obs, err := c.JetStream().ObjectStore(ctx, "pace_dead_letters")
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Delete(ctx, letters[0].RawObject); err != nil {
		t.Fatal(err)
	}

	if text := deadLetters(t, url, exitOK, "show", seq); !strings.Contains(text, "job:         "+job) ||
		!strings.Contains(text, "body object: "+letters[0].RawObject) || !strings.Contains(text, "unavailable") ||
		!strings.Contains(text, "pace dead-letters delete "+seq) {
		t.Errorf("show of a letter without its object:\n%s", text)
	}
	var shown letterLine
	if err := json.Unmarshal([]byte(deadLetters(t, url, exitOK, "show", seq, "-o", "json")), &shown); err != nil ||
		shown.BodyError == "" || shown.Job != job {
		t.Errorf("show -o json: %+v (%v), want the letter with body_error", shown, err)
	}
	if out, errOut, code := runPace(t, "dead-letters", "show", seq, "--raw", "--nats", url); code != exitFailure ||
		out != "" || !strings.Contains(errOut, "unavailable") {
		t.Errorf("show --raw: exit %d, %d bytes, stderr %q; want exit %d and no bytes", code, len(out), errOut, exitFailure)
	}
	deadLetters(t, url, exitFailure, "redrive", seq)

	junk := nats.NewMsg(c.Prefix().Metrics(job, schemas.DeadMetrics))
	junk.Data = []byte("not a letter")
	ack, err := c.JetStream().PublishMsg(ctx, junk)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{seq, fmt.Sprintf("metrics:%d", ack.Sequence)} {
		if out := deadLetters(t, url, exitOK, "delete", id); out != "deleted "+id+"\n" {
			t.Errorf("delete %s said %q", id, out)
		}
		deadLetters(t, url, exitRejected, "delete", id)
	}
	if left := listLetters(t, url, job); len(left) != 0 {
		t.Errorf("letters after deleting = %+v, want none", left)
	}
}
