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
