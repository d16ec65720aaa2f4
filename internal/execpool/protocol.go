package execpool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pace-platform/pace/schemas"
)

// Mode is how items travel through a process.
type Mode string

// Modes of a Pool.
const (
	// Lines sends the payload as the line and takes the answer line as the result.
	Lines Mode = "lines"
	// JSON sends {"id","payload"} and takes {"id","result"} or {"id","error"}.
	JSON Mode = "json"
)

// ErrNewline is returned by Handle, in Lines mode, for an item whose
// payload contains a newline: it cannot be sent as one line.
var ErrNewline = errors.New("payload contains a newline, which lines mode cannot send (use --exec-mode json)")

// ErrProcessFailed is wrapped by Handle's error when the process serving the
// item exited, broke the protocol or was stopped because the item's context
// ended. The process is replaced for the next item.
var ErrProcessFailed = errors.New("process failed")

// maxAnswer bounds an answer line; a longer one breaks the protocol.
const maxAnswer = 8 << 20

// request is an item's line in JSON mode.
type request struct {
	ID      string `json:"id"`
	Payload string `json:"payload"`
}

// answer is a process's line in JSON mode.
type answer struct {
	ID     *string         `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// encode returns the line that sends item, its newline included.
func (m Mode) encode(item *schemas.WorkItem) ([]byte, error) {
	if m == Lines {
		if strings.Contains(item.Payload, "\n") {
			return nil, ErrNewline
		}
		return append([]byte(item.Payload), '\n'), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(request{ID: item.ID, Payload: item.Payload}); err != nil {
		return nil, fmt.Errorf("encode item %s: %w", item.ID, err)
	}
	return b.Bytes(), nil // Encode ends it with a newline
}

// decode returns item's result from the answer line (without its newline).
// An error wrapping ErrProcessFailed means the process is out of step; any
// other fails the item alone.
func (m Mode) decode(item *schemas.WorkItem, line []byte) (string, error) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if m == Lines {
		return string(line), nil
	}
	var a answer
	if err := json.Unmarshal(line, &a); err != nil {
		return "", fmt.Errorf("%w: answer to item %s is not a JSON object with a string id: %q", ErrProcessFailed, item.ID, clip(line))
	}
	switch {
	case a.ID == nil:
		return "", fmt.Errorf("%w: answer to item %s has no id: %q", ErrProcessFailed, item.ID, clip(line))
	case *a.ID != item.ID:
		return "", fmt.Errorf("%w: answer to item %s carries id %q", ErrProcessFailed, item.ID, *a.ID)
	case given(a.Error):
		return "", errors.New(text(a.Error))
	case len(a.Result) == 0 || isNull(a.Result):
		return "", fmt.Errorf("answer to item %s has neither result nor error: %q", item.ID, clip(line))
	}
	return text(a.Result), nil
}

// isObject reports whether line looks like a JSON object (its first byte
// but blanks is '{'): in JSON mode, an answer; any other line a process
// writes is output of its own, logged as the item's.
func isObject(line []byte) bool {
	t := bytes.TrimLeft(line, " \t")
	return len(t) > 0 && t[0] == '{'
}

// given reports whether an answer's field holds a value other than null and "".
func given(v json.RawMessage) bool {
	return len(v) > 0 && !isNull(v) && !bytes.Equal(v, []byte(`""`))
}

func isNull(v json.RawMessage) bool { return bytes.Equal(v, []byte("null")) }

// text is a JSON string's value, or any other JSON value's compact text.
func text(v json.RawMessage) string {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}

// clip shortens a line quoted in an error.
func clip(line []byte) []byte {
	const keep = 200
	if len(line) > keep {
		return append(line[:keep:keep], "…"...)
	}
	return line
}
