package bustest

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// CaseHeader names, on each message Malformed returns, the case it is.
const CaseHeader = "Pace-Test-Case"

// LargeMalformed is the size of Malformed's "large" case: large, yet small
// enough for its dead letter (base64, a third larger) to fit the server's
// default 1 MiB max_payload.
const LargeMalformed = 512 << 10

// Malformed returns messages to subject that no consumer of valid's
// schema can read, by case: bytes that are not UTF-8, an empty body,
// truncated JSON, a mistyped field, JSON that is not an object, valid's
// body under a newer or unreadable schema version or another schema's
// name, and a large body. valid is a correctly encoded message (NewMsg).
func Malformed(subject string, valid *nats.Msg) map[string]*nats.Msg {
	header := func(k, v string) nats.Header { return nats.Header{k: {v}} }
	cases := map[string]struct {
		data   []byte
		header nats.Header
	}{
		"invalid-utf8":   {data: []byte{0xff, 0xfe, 'a', 0x00, 0xc3, '"', '\\'}},
		"empty":          {data: []byte{}},
		"truncated-json": {data: valid.Data[:len(valid.Data)/2]},
		"wrong-type":     {data: []byte(`{"job": 5, "at": true}`)},
		"not-an-object":  {data: []byte(`["a"]`)},
		"newer-version":  {data: valid.Data, header: header(schemas.HeaderSchemaVersion, "99")},
		"bad-version":    {data: valid.Data, header: header(schemas.HeaderSchemaVersion, "one")},
		"other-schema":   {data: valid.Data, header: header(schemas.HeaderSchema, "no_such_schema")},
		"large":          {data: bytes.Repeat([]byte{0xff}, LargeMalformed)},
	}
	out := make(map[string]*nats.Msg, len(cases))
	for name, c := range cases {
		m := nats.NewMsg(subject)
		m.Data = c.data
		for k, v := range c.header {
			m.Header[k] = v
		}
		m.Header.Set(CaseHeader, name)
		out[name] = m
	}
	return out
}

// CheckKept fails t unless dead holds exactly one malformed dead letter
// per message of cases (keyed as Malformed keys them), each keeping its
// message's body byte for byte, its headers and its subject.
func CheckKept(t testing.TB, cases map[string]*nats.Msg, dead []*schemas.DeadLetter) {
	t.Helper()
	if len(dead) != len(cases) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(cases))
	}
	seen := map[string]bool{}
	for _, d := range dead {
		name := nats.Header(d.Header).Get(CaseHeader)
		m, ok := cases[name]
		switch {
		case !ok || seen[name]:
			t.Errorf("unexpected dead letter %+v", d)
			continue
		case d.Reason != schemas.Malformed || d.LastError == "" || d.Sequence == 0:
			t.Errorf("%s: reason %q, last error %q, sequence %d; want malformed, why, where", name, d.Reason, d.LastError, d.Sequence)
		case d.Raw == nil || !bytes.Equal(d.Raw, m.Data):
			t.Errorf("%s: raw = %.64q (%d bytes), want %.64q (%d bytes)", name, d.Raw, len(d.Raw), m.Data, len(m.Data))
		case d.Subject != m.Subject:
			t.Errorf("%s: subject = %q, want %q", name, d.Subject, m.Subject)
		case !reflect.DeepEqual(map[string][]string(m.Header), d.Header):
			t.Errorf("%s: headers = %v, want %v", name, d.Header, m.Header)
		}
		seen[name] = true
	}
}

// PublishMalformed publishes on subject each of Malformed's messages for
// valid (a message of the schema the subject's readers expect) and returns
// them, keyed by case.
func PublishMalformed(t testing.TB, c *bus.Client, subject string, valid schemas.Message) map[string]*nats.Msg {
	t.Helper()
	ctx := context.Background()
	m, err := bus.NewMsg(ctx, subject, valid)
	if err != nil {
		t.Fatal(err)
	}
	cases := Malformed(subject, m)
	for _, m := range cases {
		if _, err := c.JetStream().PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return cases
}

// WaitKept waits until job has a malformed dead letter per message of cases
// (PublishMalformed) and checks them with CheckKept.
func WaitKept(t testing.TB, c *bus.Client, job string, cases map[string]*nats.Msg) {
	t.Helper()
	var letters []*schemas.DeadLetter
	var err error
	Eventually(t, 10*time.Second, "a dead letter per malformed message of "+job, func() bool {
		letters, err = c.Letters().StoredMalformed(context.Background(), job)
		return err == nil && len(letters) >= len(cases)
	})
	CheckKept(t, cases, letters)
}
