// Package lines splits the output of workers into bounded lines.
package lines

import (
	"bytes"
	"io"
)

// Max bounds one line of a worker's output; the rest of a longer line is
// dropped.
const Max = 4 << 10

// Writer splits what a worker writes into lines and hands each, without its
// newline (or carriage return), to Emit; a last line without one is emitted
// by Close. It is not safe for concurrent use (exec gives stdout and stderr,
// when they are one writer, one goroutine).
type Writer struct {
	Emit func(line string)
	buf  []byte
	long bool // dropping the rest of a line longer than Max
}

var _ io.WriteCloser = (*Writer)(nil)

func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !w.long {
			room := Max - len(w.buf)
			if len(chunk) > room {
				chunk, w.long = chunk[:room], true
			}
			w.buf = append(w.buf, chunk...)
		}
		if i < 0 {
			break
		}
		w.flush()
		p = p[i+1:]
	}
	return n, nil
}

// Close emits a last line that has no newline.
func (w *Writer) Close() error {
	if len(w.buf) > 0 || w.long {
		w.flush()
	}
	return nil
}

func (w *Writer) flush() {
	w.Emit(string(bytes.TrimSuffix(w.buf, []byte{'\r'})))
	w.buf, w.long = w.buf[:0], false
}

// ItemLines and ItemBytes bound the lines of one item's output that a job's
// log keeps.
const (
	ItemLines = 100
	ItemBytes = 16 << 10
)

// Budget counts the lines of one item's output against ItemLines and
// ItemBytes. The zero value is an empty budget.
type Budget struct {
	Lines, Bytes int // kept so far
	Cut          int // bytes of the lines left out
}

// Keep reports whether line fits in what is left of the budget, and counts
// it either way.
func (b *Budget) Keep(line string) bool {
	if b.Lines >= ItemLines || b.Bytes+len(line) > ItemBytes {
		b.Cut += len(line) + 1
		return false
	}
	b.Lines, b.Bytes = b.Lines+1, b.Bytes+len(line)+1
	return true
}
