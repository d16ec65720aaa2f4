package schemas

import "testing"

// TestDeadLetterSize: a letter's size is its object's when the body is kept
// in the object store, else its raw body's, else its payload's.
func TestDeadLetterSize(t *testing.T) {
	for _, tc := range []struct {
		d    DeadLetter
		want int
	}{
		{DeadLetter{Payload: "abc"}, 3},
		{DeadLetter{Payload: "abc", Raw: []byte{}}, 0},
		{DeadLetter{Raw: []byte{0xff, 0}}, 2},
		{DeadLetter{RawObject: "o", RawSize: 5 << 20, Payload: "x"}, 5 << 20},
	} {
		if got := tc.d.Size(); got != tc.want {
			t.Errorf("%+v: Size() = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// TestItemLine: a line's ending is not part of its item, and a blank line
// is no item.
func TestItemLine(t *testing.T) {
	for line, want := range map[string]string{"a\n": "a", "a\r\n": "a", "a b": "a b", " a ": " a ", "\n": "", "  \t\r\n": "", "": ""} {
		got, ok := ItemLine(line)
		if ok != (want != "") || ok && got != want {
			t.Errorf("ItemLine(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
}
