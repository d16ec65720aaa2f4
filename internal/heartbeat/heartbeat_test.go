package heartbeat

import (
	"fmt"
	"testing"
)

// TestNextSpreadsJobs: a thousand jobs asking at the same tick beat within
// [every/2, 1.5·every) ticks, then every `every` ticks on their phase, and
// about as many in each tenth of the period.
func TestNextSpreadsJobs(t *testing.T) {
	const every, jobs, now = 300, 1000, 7
	perTenth := make([]int, 10)
	for i := range jobs {
		id := fmt.Sprintf("job-%d", i)
		n := Next(id, now, every)
		if n < every/2 || n >= every+every/2 {
			t.Fatalf("%s: next beat in %d ticks, want in [%d, %d)", id, n, every/2, every+every/2)
		}
		if again := Next(id, now+uint64(n), every); again != every {
			t.Fatalf("%s: the beat after tick %d is %d ticks later, want %d", id, now+n, again, every)
		}
		perTenth[(now+n)%every*10/every]++
	}
	for i, n := range perTenth {
		if n < jobs/10/2 || n > jobs/10*2 {
			t.Errorf("%d of %d beats in tenth %d of the period, want about %d: %v", n, jobs, i, jobs/10, perTenth)
		}
	}
}
