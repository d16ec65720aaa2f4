package execpool

import (
	"errors"
	"strings"
	"testing"

	"github.com/pace-platform/pace/schemas"
)

func TestEncode(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		payload string
		want    string
		err     error
	}{
		{"line", Lines, "a b\r", "a b\r\n", nil},
		{"empty line", Lines, "", "\n", nil},
		{"newline", Lines, "a\nb", "", ErrNewline},
		{"json", JSON, "a\n<b>\"", `{"id":"i1","payload":"a\n<b>\""}` + "\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.mode.encode(&schemas.WorkItem{ID: "i1", Job: "j", Payload: tt.payload})
			if string(got) != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("encode = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name   string
		mode   Mode
		line   string
		want   string
		err    string // "" for none
		broken bool   // the error wraps ErrProcessFailed
	}{
		{"line", Lines, "A B", "A B", "", false},
		{"crlf", Lines, "A\r", "A", "", false},
		{"anything is a line", Lines, "{not json", "{not json", "", false},
		{"string result", JSON, `{"id":"i1","result":"A"}`, "A", "", false},
		{"empty result", JSON, `{"id":"i1","result":""}`, "", "", false},
		{"number result", JSON, `{"id":"i1","result":42}`, "42", "", false},
		{"object result", JSON, `{"id":"i1","result":{"n": 1}}`, `{"n":1}`, "", false},
		{"crlf", JSON, "{\"id\":\"i1\",\"result\":\"A\"}\r", "A", "", false},
		{"error", JSON, `{"id":"i1","error":"no such file"}`, "", "no such file", false},
		{"error object", JSON, `{"id":"i1","error":{"code":2}}`, "", `{"code":2}`, false},
		{"null error", JSON, `{"id":"i1","result":"A","error":null}`, "A", "", false},
		{"empty error", JSON, `{"id":"i1","result":"A","error":""}`, "A", "", false},
		{"neither", JSON, `{"id":"i1"}`, "", "neither result nor error", false},
		{"null result", JSON, `{"id":"i1","result":null}`, "", "neither result nor error", false},
		{"wrong id", JSON, `{"id":"i2","result":"A"}`, "", `answer to item i1 carries id "i2"`, true},
		{"numeric id", JSON, `{"id":1,"result":"A"}`, "", "not a JSON object with a string id", true},
		{"no id", JSON, `{"result":"A"}`, "", "has no id", true},
		{"garbage", JSON, `A`, "", "not a JSON object", true},
		{"array", JSON, `["i1","A"]`, "", "not a JSON object", true},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode)+" "+tt.name, func(t *testing.T) {
			got, err := tt.mode.decode(&schemas.WorkItem{ID: "i1", Job: "j"}, []byte(tt.line))
			if got != tt.want {
				t.Errorf("result = %q, want %q", got, tt.want)
			}
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("err = %v, want %q", err, tt.err)
			case err != nil && errors.Is(err, ErrProcessFailed) != tt.broken:
				t.Errorf("err = %v: wraps ErrProcessFailed = %t, want %t", err, !tt.broken, tt.broken)
			}
		})
	}
}
