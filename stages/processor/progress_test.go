package processor

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func dur(d time.Duration) *schemas.Duration { v := schemas.Duration(d); return &v }

// batch is a batch job of total items started at t0 with a deadline.
func batch(total int, deadline time.Duration) schemas.Sample {
	return schemas.Sample{Job: "j", Mode: schemas.Batch, State: schemas.Ongoing, Total: total,
		StartedAt: t0, Deadline: t0.Add(deadline)}
}

func TestAsperathosCompleted(t *testing.T) {
	// asperathos.md §5.2: completed = N − (queued + processing).
	if got := AsperathosCompleted(1500, 5, 10); got != 1485 {
		t.Fatalf("AsperathosCompleted(1500, 5, 10) = %d, want 1485", got)
	}
}

func TestObserveSingleSample(t *testing.T) {
	tests := []struct {
		name string
		s    func() schemas.Sample
		want schemas.Progress
	}{
		{
			name: "asperathos 1500 items, 5 queued, 10 processing, 60s of 600s",
			s: func() schemas.Sample {
				s := batch(1500, 600*time.Second)
				s.At, s.Pending, s.InFlight, s.Done, s.Replicas = t0.Add(60*time.Second), 5, 10, 1485, 3
				return s
			},
			want: schemas.Progress{JobProgress: 0.99, TimeProgress: 0.1, Error: 0.89, Replicas: 3, Total: 1500, Done: 1485,
				Throughput: 24.75, PerReplica: 8.25, ETA: dur(606 * time.Millisecond), ReplicasNeeded: 1,
				QueueLength: 5, InFlight: 10},
		},
		{
			name: "progress of 0 is 0 (Asperathos reused the previous value)",
			s: func() schemas.Sample {
				s := batch(100, 100*time.Second)
				s.At, s.Pending, s.Replicas = t0.Add(25*time.Second), 100, 2
				return s
			},
			want: schemas.Progress{JobProgress: 0, TimeProgress: 0.25, Error: -0.25, Replicas: 2, Total: 100, QueueLength: 100},
		},
		{
			name: "sub-second elapsed time",
			s: func() schemas.Sample {
				s := batch(10, 2*time.Second)
				s.At, s.Pending = t0.Add(500*time.Millisecond), 10
				return s
			},
			want: schemas.Progress{TimeProgress: 0.25, Error: -0.25, Total: 10, QueueLength: 10},
		},
		{
			name: "no wrap-around after one day; time progress not capped",
			s: func() schemas.Sample {
				s := batch(10, 24*time.Hour)
				s.At, s.Done, s.Replicas = t0.Add(36*time.Hour), 5, 1
				s.Pending = 5
				return s
			},
			want: schemas.Progress{JobProgress: 0.5, TimeProgress: 1.5, Error: -1, Replicas: 1, Total: 10, Done: 5,
				Throughput: 0.000039, PerReplica: 0.000039, ETA: dur(129600 * time.Second), QueueLength: 5},
		},
		{
			name: "dead letters count as finished; progress capped at 1",
			s: func() schemas.Sample {
				s := batch(10, 100*time.Second)
				s.At, s.Done, s.Dead, s.State = t0.Add(50*time.Second), 9, 2, schemas.Failed
				return s
			},
			want: schemas.Progress{State: schemas.Failed, JobProgress: 1, TimeProgress: 0.5, Error: 0.5, Total: 10, Done: 9, Dead: 2,
				Throughput: 0.22, ETA: dur(0)},
		},
		{
			name: "replicas needed to meet the deadline at the measured rate",
			s: func() schemas.Sample {
				s := batch(1000, 100*time.Second)
				// 100 done in 50s by 2 replicas: 1 item/s per replica; 900 left in 50s → 18.
				s.At, s.Done, s.Pending, s.Replicas = t0.Add(50*time.Second), 100, 900, 2
				return s
			},
			want: schemas.Progress{JobProgress: 0.1, TimeProgress: 0.5, Error: -0.4, Replicas: 2, Total: 1000, Done: 100,
				Throughput: 2, PerReplica: 1, ETA: dur(450 * time.Second), ReplicasNeeded: 18, QueueLength: 900},
		},
		{
			name: "streaming job: rates, backlog, lag, flux error",
			s: func() schemas.Sample {
				return schemas.Sample{Job: "j", Mode: schemas.Streaming, State: schemas.Ongoing, StartedAt: t0,
					At: t0.Add(10 * time.Second), Pending: 30, InFlight: 2, Done: 68, Replicas: 2, Oldest: t0.Add(4 * time.Second)}
			},
			want: schemas.Progress{Mode: schemas.Streaming, Error: -3.2, Replicas: 2, Done: 68, Throughput: 6.8, PerReplica: 3.4,
				QueueLength: 30, InFlight: 2, InputRate: 10, OutputRate: 6.8, Backlog: 32, Lag: schemas.Duration(6 * time.Second)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s()
			got, err := NewTracker(time.Minute).Observe(&s)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Job, want.At, want.State = s.Job, s.At, s.State
			if want.Mode == "" {
				want.Mode = s.Mode
			}
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("progress mismatch (-want +got):\n%s", diff)
			}
			if errs := got.Validate(); len(errs) > 0 {
				t.Errorf("invalid progress: %v", errs)
			}
		})
	}
}

// TestObserveWindow steps a fake clock through a run whose rate changes and
// checks the smoothed throughput follows it over the window only.
func TestObserveWindow(t *testing.T) {
	tr := NewTracker(10 * time.Second)
	steps := []struct {
		after    time.Duration
		done     int
		wantRate float64
	}{
		{1 * time.Second, 10, 10}, // bootstrap from the start: 10 in 1s
		{5 * time.Second, 50, 10}, // 50 in 5s
		{10 * time.Second, 100, 10},
		{15 * time.Second, 100, 5}, // stalled for 5s: (100-50)/(15-5)
		{20 * time.Second, 100, 0}, // stalled for the whole window
		{21 * time.Second, 120, 0}, // the window reaches back to the point at 10s: 20/11
	}
	steps[5].wantRate = round(20.0 / 11)
	for _, st := range steps {
		s := batch(1000, time.Hour)
		s.At, s.Done, s.Replicas = t0.Add(st.after), st.done, 1
		p, err := tr.Observe(&s)
		if err != nil {
			t.Fatal(err)
		}
		if p.Throughput != st.wantRate {
			t.Errorf("at +%s: throughput = %v, want %v", st.after, p.Throughput, st.wantRate)
		}
	}
}

func TestObserveStale(t *testing.T) {
	tr := NewTracker(0)
	s := batch(10, time.Minute)
	s.At, s.Done = t0.Add(2*time.Second), 4
	if _, err := tr.Observe(&s); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{2 * time.Second, time.Second} {
		old := s
		old.At = t0.Add(at)
		if _, err := tr.Observe(&old); !errors.Is(err, ErrStale) {
			t.Errorf("sample at +%s after +2s: err = %v, want ErrStale", at, err)
		}
	}
}

// A job with a cost is priced as Asperathos' kubejobs_cost monitor did:
// rate = cpu_price·vCPUs + memory_price·GB, error = rate − desired; what
// it spent grows by the rate over the time between samples.
func TestCostIsPricedFromUsage(t *testing.T) {
	desired := 1.0
	cost := &schemas.CostSpec{CPUPrice: 2, MemoryPrice: 0.5, Desired: &desired}
	tr := NewTracker(0)
	at := func(sec int) schemas.Sample {
		s := batch(100, time.Hour)
		s.At, s.Replicas, s.Cost = t0.Add(time.Duration(sec)*time.Second), 2, cost
		return s
	}
	s := at(0)
	p, err := tr.Observe(&s)
	if err != nil {
		t.Fatal(err)
	}
	if p.CostRate != 0 || p.Error != -1 || p.Spent != 0 {
		t.Errorf("before any usage: rate %v, error %v, spent %v; want 0, -1, 0", p.CostRate, p.Error, p.Spent)
	}
	tr.Use(&schemas.Usage{Job: "j", At: t0.Add(time.Second), CPUCores: 1.5, MemoryBytes: 2e9, Replicas: 2})
	tr.Use(&schemas.Usage{Job: "j", At: t0, CPUCores: 9}) // older: ignored
	s = at(1800)
	if p, err = tr.Observe(&s); err != nil {
		t.Fatal(err)
	}
	// 2·1.5 + 0.5·2 = 4 per hour, over half an hour: 2 spent; 3 over the desired 1.
	if p.CostRate != 4 || p.Error != 3 || p.Spent != 2 || p.CPUCores != 1.5 || p.MemoryBytes != 2e9 || *p.DesiredCost != 1 {
		t.Errorf("progress %+v", p)
	}
	s = at(3600)
	s.Cost = &schemas.CostSpec{CPUPrice: 2, MemoryPrice: 0.5} // priced, not controlled by cost
	if p, err = tr.Observe(&s); err != nil {
		t.Fatal(err)
	}
	if p.Spent != 4 || p.DesiredCost != nil || p.Error != round(JobProgress(0, 100)-1) {
		t.Errorf("without a desired cost: spent %v, desired %v, error %v; want 4, none, the deadline's", p.Spent, p.DesiredCost, p.Error)
	}
}
