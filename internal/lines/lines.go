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
