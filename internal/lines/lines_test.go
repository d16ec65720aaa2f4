package lines

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriterSplitsLinesAndBoundsThem(t *testing.T) {
	var got []string
	w := &Writer{Emit: func(line string) { got = append(got, line) }}
	long := strings.Repeat("x", Max+10)
	for _, chunk := range []string{"one\ntw", "o\r\n", "", long + "\n", "three\n\nlast"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	_ = w.Close()
	want := []string{"one", "two", long[:Max], "three", "", "last"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
