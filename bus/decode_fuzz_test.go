package bus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// codecs holds bus.Decode of each message type, in schemas.All's order.
var codecs = []codec{
	codecOf[schemas.JobSpec](), codecOf[schemas.JobRecord](), codecOf[schemas.JobEvent](),
	codecOf[schemas.WorkItem](), codecOf[schemas.Result](), codecOf[schemas.DeadLetter](),
	codecOf[schemas.Sample](), codecOf[schemas.Progress](), codecOf[schemas.Usage](), codecOf[schemas.Decision](),
	codecOf[schemas.KubeRequest](), codecOf[schemas.KubeOutcome](), codecOf[schemas.AdmissionEvent](),
	codecOf[schemas.LogLine](),
}

type codec struct {
	name   string
	decode func([]byte, nats.Header) (schemas.Message, error)
}

func codecOf[T any, P interface {
	*T
	schemas.Message
}]() codec {
	name, _ := P(new(T)).Schema()
	return codec{name, func(data []byte, h nats.Header) (schemas.Message, error) {
		v, err := bus.Decode[T, P](data, h)
		if err != nil {
			return nil, err
		}
		return P(v), nil
	}}
}

func TestCodecsCoverEveryMessage(t *testing.T) {
	t.Parallel()
	var got, want []string
	for _, c := range codecs {
		got = append(got, c.name)
	}
	for _, m := range schemas.All() {
		name, _ := m.Schema()
		want = append(want, name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("codecs differ from schemas.All (-want +got):\n%s", diff)
	}
}

// semantic compares messages as their readers see them: empty and absent
// lists alike, raw JSON by value rather than spelling. Raw bytes ([]byte)
// are compared as they are: a transformer of json.RawMessage would also
// take them.
var semantic = cmp.Options{
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() != reflect.TypeFor[json.RawMessage]() }, cmpopts.EquateEmpty()),
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() == reflect.TypeFor[json.RawMessage]() }, cmp.Transformer("json", func(r json.RawMessage) any {
		var v any
		if len(r) == 0 || json.Unmarshal(r, &v) != nil {
			return string(r)
		}
		return v
	})),
}

// FuzzDecode feeds bus.Decode of every message type (kind picks it) with
// arbitrary payloads and schema headers. A message is refused with
// ErrMalformed, or it is valid and survives NewMsg → Decode unchanged, its
// encoding a fixed point.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, schema, version string, data []byte) {
		decode := codecs[int(kind)%len(codecs)].decode
		h := nats.Header{}
		if schema != "" {
			h.Set(schemas.HeaderSchema, schema)
		}
		if version != "" {
			h.Set(schemas.HeaderSchemaVersion, version)
		}
		m, err := decode(data, h)
		if err != nil {
			if !errors.Is(err, bus.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if errs := m.Validate(); len(errs) > 0 {
			t.Fatalf("decoded an invalid message: %v", errs)
		}
		msg, err := bus.NewMsg(context.Background(), "fuzz", m)
		if err != nil {
			t.Fatalf("re-encode a decoded %T: %v", m, err)
		}
		back, err := decode(msg.Data, msg.Header)
		if err != nil {
			t.Fatalf("decode the re-encoded %s: %v", msg.Data, err)
		}
		if diff := cmp.Diff(m, back, semantic); diff != "" {
			t.Fatalf("round trip through %s changed the %T (-decoded +round-tripped):\n%s", msg.Data, m, diff)
		}
		again, err := json.Marshal(back)
		if err != nil || !bytes.Equal(again, msg.Data) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s (%v)", msg.Data, again, err)
		}
	})
}
