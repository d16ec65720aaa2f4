package bus

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pace-platform/pace/schemas"
)

// The JSON of the two messages every item costs, work items and results,
// is written and read here by hand: encoding/json's reflection was a tenth
// of a worker's CPU. The output is what encoding/json writes, less its
// HTML escaping; input that is not a plain object of the type's fields
// (an escape, another field, a null) goes to encoding/json, so both read
// every message alike (FuzzDecodeWorkItem checks it).

// encode returns m's JSON.
func encode(m schemas.Message) ([]byte, error) {
	switch m := m.(type) {
	case *schemas.WorkItem:
		return appendWorkItem(make([]byte, 0, 64+len(m.ID)+len(m.Job)+len(m.Payload)), m), nil
	case *schemas.Result:
		return appendResult(make([]byte, 0, 128+len(m.ItemID)+len(m.Job)+len(m.Output)+len(m.Worker)), m), nil
	}
	return json.Marshal(m)
}

func appendWorkItem(b []byte, it *schemas.WorkItem) []byte {
	b = appendField(b, '{', "id", it.ID)
	b = appendField(b, ',', "job", it.Job)
	b = appendField(b, ',', "payload", it.Payload)
	if !it.CreatedAt.IsZero() {
		b = appendTime(append(b, `,"created_at":`...), it.CreatedAt)
	}
	return append(b, '}')
}

func appendResult(b []byte, r *schemas.Result) []byte {
	b = appendField(b, '{', "item_id", r.ItemID)
	b = appendField(b, ',', "job", r.Job)
	b = appendField(b, ',', "result", r.Output)
	if r.Worker != "" {
		b = appendField(b, ',', "worker", r.Worker)
	}
	if r.Attempt != 0 {
		b = strconv.AppendInt(append(b, `,"attempt":`...), int64(r.Attempt), 10)
	}
	if r.Duration != 0 {
		b = appendField(b, ',', "duration", time.Duration(r.Duration).String())
	}
	if !r.FinishedAt.IsZero() {
		b = appendTime(append(b, `,"finished_at":`...), r.FinishedAt)
	}
	return append(b, '}')
}

// appendField appends sep, then "key":value with value as a JSON string.
func appendField(b []byte, sep byte, key, value string) []byte {
	b = append(b, sep, '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	if !plain(s) {
		q, _ := json.Marshal(s) // a string always encodes
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plain reports whether s is printable ASCII with no '"' or '\': it is
// then its own JSON string body.
func plain(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendTime appends t as encoding/json does (RFC 3339 with nanoseconds).
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		q, _ := json.Marshal(t) // refused by encoding/json too; validation never lets one through
		return append(b, q...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// decode fills v from data.
func decode(data []byte, v schemas.Message) error {
	if it, ok := v.(*schemas.WorkItem); ok && decodeWorkItem(data, it) {
		return nil
	}
	return json.Unmarshal(data, v)
}

// decodeWorkItem fills it from data and reports true when data is one
// object whose members are id, job, payload and created_at, each at most
// once, with string values free of escapes; otherwise it leaves it as it
// was and reports false.
func decodeWorkItem(data []byte, it *schemas.WorkItem) bool {
	out, ok := parseWorkItem(data)
	if ok {
		*it = out
	}
	return ok
}

func parseWorkItem(data []byte) (out schemas.WorkItem, ok bool) {
	var seen [4]bool
	s := scanner{data: data}
	if !s.byte('{') {
		return out, false
	}
	if s.byte('}') {
		return out, s.end()
	}
	for {
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return out, false
		}
		val, ok := s.str()
		if !ok {
			return out, false
		}
		var i int
		switch string(key) {
		case "id":
			i, out.ID = 0, string(val)
		case "job":
			i, out.Job = 1, string(val)
		case "payload":
			i, out.Payload = 2, string(val)
		case "created_at":
			i = 3
			if out.CreatedAt.UnmarshalText(val) != nil {
				return out, false
			}
		default:
			return out, false
		}
		if seen[i] {
			return out, false
		}
		seen[i] = true
		if s.byte('}') {
			return out, s.end()
		}
		if !s.byte(',') {
			return out, false
		}
	}
}

// scanner reads the few JSON tokens decodeWorkItem accepts.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// byte consumes c, after white space, when it comes next.
func (s *scanner) byte(c byte) bool {
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// str consumes a string with no escape and no control character, and
// returns its valid UTF-8 body.
func (s *scanner) str() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.pos
	for ; s.pos < len(s.data); s.pos++ {
		switch c := s.data[s.pos]; {
		case c == '"':
			body := s.data[start:s.pos]
			s.pos++
			return body, utf8.Valid(body)
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.space()
	return s.pos == len(s.data)
}
