package schemas_test

import (
	"testing"

	"github.com/pace-platform/pace/schemas"
)

func TestReplicasFor(t *testing.T) {
	for _, tc := range []struct {
		name             string
		work, perReplica float64
		want             int
	}{
		{"exact", 100, 50, 2},
		{"rounds up", 101, 50, 3},
		{"float noise is not a replica", 0.3, 0.1, 3}, // 0.3/0.1 = 3.0000000000000004
		{"nothing left to do", 0, 1, 0},
		{"no rate yet", 10, 0, 0},
		{"past the deadline", 10, -1, 0},
	} {
		if got := schemas.ReplicasFor(tc.work, tc.perReplica); got != tc.want {
			t.Errorf("%s: ReplicasFor(%v, %v) = %d, want %d", tc.name, tc.work, tc.perReplica, got, tc.want)
		}
	}
}
