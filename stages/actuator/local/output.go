package local

import (
	"bytes"
	"io"
)

// maxLine bounds one line of a replica's output; the rest of a longer line
// is dropped.
const maxLine = 4 << 10

// lineWriter splits what a replica writes into lines and hands each, without
// its newline, to emit; a last line without one is emitted by Close. It is
// not safe for concurrent use (exec gives stdout and stderr, when they are
// one writer, one goroutine).
type lineWriter struct {
	emit func(line string)
	buf  []byte
	long bool // dropping the rest of a line longer than maxLine
}

var _ io.WriteCloser = (*lineWriter)(nil)

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !w.long {
			room := maxLine - len(w.buf)
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
func (w *lineWriter) Close() error {
	if len(w.buf) > 0 || w.long {
		w.flush()
	}
	return nil
}

func (w *lineWriter) flush() {
	w.emit(string(bytes.TrimSuffix(w.buf, []byte{'\r'})))
	w.buf, w.long = w.buf[:0], false
}
