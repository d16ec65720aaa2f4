package apfhttp

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// countsWholeResource reports whether a list response holds (the first page
// of) every object of its resource: a cluster-wide list of no particular
// object, with no selector and no continue token.
func countsWholeResource(ri RequestInfo, q url.Values) bool {
	return ri.IsResourceRequest && ri.Verb == "list" && ri.Namespace == "" && ri.Name == "" && ri.Subresource == "" &&
		q.Get("labelSelector") == "" && q.Get("fieldSelector") == "" && q.Get("continue") == ""
}

// listCounter is a ResponseWriter that also feeds the body of a JSON list
// response to a decoder counting its items, when the response is one.
type listCounter struct {
	http.ResponseWriter
	pw      *io.PipeWriter // nil until WriteHeader decides to count
	done    chan listTally
	decided bool
}

// listTally is what the decoder found: ok when the body was a list with a
// known total.
type listTally struct {
	ok           bool
	total, bytes int64
	items        int64
}

func (lc *listCounter) WriteHeader(code int) {
	if !lc.decided {
		lc.decided = true
		h := lc.Header()
		mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
		enc := h.Get("Content-Encoding")
		if code == http.StatusOK && mt == "application/json" && (enc == "" || enc == "gzip") {
			pr, pw := io.Pipe()
			lc.pw, lc.done = pw, make(chan listTally, 1)
			go func() { lc.done <- tallyList(pr, enc == "gzip") }()
		}
	}
	lc.ResponseWriter.WriteHeader(code)
}

func (lc *listCounter) Write(b []byte) (int, error) {
	if !lc.decided {
		lc.WriteHeader(http.StatusOK)
	}
	n, err := lc.ResponseWriter.Write(b)
	if lc.pw != nil && n > 0 {
		_, _ = lc.pw.Write(b[:n]) // the decoder drains the pipe even after it gives up
	}
	return n, err
}

// Flush implements http.Flusher.
func (lc *listCounter) Flush() {
	if f, ok := lc.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (lc *listCounter) Unwrap() http.ResponseWriter { return lc.ResponseWriter }

// finish ends the body and returns the tally (not ok if nothing was counted).
func (lc *listCounter) finish() listTally {
	if lc.pw == nil {
		return listTally{}
	}
	_ = lc.pw.Close()
	return <-lc.done
}

// tallyList decodes a Kubernetes list from r ({"metadata":{...},"items":[...]}),
// counting its items and their JSON bytes; the total adds the
// remainingItemCount of a limited list, and a limited list without one has
// no known total. It reads r to the end whatever happens.
func tallyList(r io.Reader, gzipped bool) (t listTally) {
	defer func() { _, _ = io.Copy(io.Discard, r) }()
	body := r
	if gzipped {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return listTally{}
		}
		body = zr
	}
	dec := json.NewDecoder(body)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return listTally{}
	}
	var meta struct {
		Continue           string `json:"continue"`
		RemainingItemCount *int64 `json:"remainingItemCount"`
	}
	sawItems := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return listTally{}
		}
		switch key {
		case "items":
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return listTally{}
			}
			for dec.More() {
				var item json.RawMessage
				if err := dec.Decode(&item); err != nil {
					return listTally{}
				}
				t.items++
				t.bytes += int64(len(item))
			}
			if _, err := dec.Token(); err != nil { // ]
				return listTally{}
			}
			sawItems = true
		case "metadata":
			if err := dec.Decode(&meta); err != nil {
				return listTally{}
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return listTally{}
			}
		}
	}
	t.total = t.items
	switch {
	case meta.RemainingItemCount != nil:
		t.total += *meta.RemainingItemCount
	case meta.Continue != "":
		return listTally{} // more pages of unknown size
	}
	t.ok = sawItems
	return t
}

// learn records a tally of resource into c; the average size is the items'
// JSON size (kube's storage sizes are of the stored encoding).
func learn(c *apf.ObjectCounts, group, resource string, t listTally) {
	if !t.ok {
		return
	}
	s := work.Stats{ObjectCount: t.total}
	if t.items > 0 {
		s.AverageObjectSizeBytes = t.bytes / t.items
	}
	c.Set(group, resource, s)
}
