package conformance

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/pace-platform/pace/flowcontrol/borrowing"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/queueset"
	pshuffle "github.com/pace-platform/pace/flowcontrol/shufflesharding"
	"github.com/pace-platform/pace/flowcontrol/work"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	keventclock "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/eventclock"
	kqueueset "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset"
	"k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	kshuffle "k8s.io/apiserver/pkg/util/shufflesharding"
	"k8s.io/utils/clock"
)

// Side-by-side benchmarks: each has a pace and a kube sub-benchmark doing the
// same work, so `go test -bench . -benchmem` prints the two next to each other.

const (
	benchQueues = 128
	benchHand   = 6
	benchQLL    = 1000
	benchFlows  = 1000
)

var benchSeq atomic.Uint64

func paceQueueSet(b *testing.B, limit int) *queueset.QueueSet {
	qs, err := queueset.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}},
		queueset.Config{Name: "bench", Queues: benchQueues, QueueLengthLimit: benchQLL, HandSize: benchHand}, limit)
	if err != nil {
		b.Fatal(err)
	}
	return qs
}

func kubeQueueSet(b *testing.B, limit int) fq.QueueSet {
	name := "bench" + string(rune('a'+benchSeq.Add(1)%26))
	qsc, err := kqueueset.NewQueueSetFactory(keventclock.Real{}).BeginConstruction(
		fq.QueuingConfig{Name: name, DesiredNumQueues: benchQueues, QueueLengthLimit: benchQLL, HandSize: benchHand},
		metrics.RatioedGaugeVecPhasedElementPair(metrics.PriorityLevelConcurrencyGaugeVec, 1, 1, []string{name}),
		metrics.PriorityLevelExecutionSeatsGaugeVec.NewForLabelValuesSafe(0, 1, []string{name}),
		fq.NewNamedIntegrator(clock.RealClock{}, name))
	if err != nil {
		b.Fatal(err)
	}
	return qsc.Complete(fq.DispatchingConfig{ConcurrencyLimit: limit, ConcurrencyDenominator: limit})
}

func flowHashes() []uint64 {
	rng := rand.New(rand.NewPCG(1, 1))
	h := make([]uint64, benchFlows)
	for i := range h {
		h[i] = rng.Uint64()
	}
	return h
}

var noop = func() {}

// BenchmarkStartFinish: one request at a time, nothing waits.
func BenchmarkStartFinish(b *testing.B) {
	hashes := flowHashes()
	ctx := context.Background()
	b.Run("pace", func(b *testing.B) {
		qs := paceQueueSet(b, 100)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r, _ := qs.Start(work.Estimate{InitialSeats: 1}, hashes[i%benchFlows], "fs", "", queueset.Callbacks{})
			r.Wait(ctx)
			r.Finish(noop)
		}
	})
	b.Run("kube", func(b *testing.B) {
		qs := kubeQueueSet(b, 100)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r, _ := qs.StartRequest(ctx, &fcrequest.WorkEstimate{InitialSeats: 1}, hashes[i%benchFlows], "", "fs", nil, nil, nil)
			r.Finish(noop)
		}
	})
}

// saturate runs many goroutines, each a stream of requests from random flows,
// against a small limit, so that most requests wait in the 128 queues and
// every finish scans them to dispatch the next one.
func saturate(b *testing.B, limit int, pace bool) {
	hashes := flowHashes()
	ctx := context.Background()
	var pqs *queueset.QueueSet
	var kqs fq.QueueSet
	if pace {
		pqs = paceQueueSet(b, limit)
	} else {
		kqs = kubeQueueSet(b, limit)
	}
	var seed atomic.Uint64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(seed.Add(1), 9))
		for pb.Next() {
			h := hashes[rng.IntN(benchFlows)]
			if pace {
				r, _ := pqs.Start(work.Estimate{InitialSeats: 1}, h, "fs", "", queueset.Callbacks{})
				if r.Wait(ctx) {
					r.Finish(noop)
				}
			} else {
				r, _ := kqs.StartRequest(ctx, &fcrequest.WorkEstimate{InitialSeats: 1}, h, "", "fs", nil, nil, nil)
				r.Finish(noop)
			}
		}
	})
}

// BenchmarkSaturated: 128 queues, hand 6, 1000 flows, 64 concurrent clients, C = 8.
func BenchmarkSaturated(b *testing.B) {
	b.Run("pace", func(b *testing.B) { saturate(b, 8, true) })
	b.Run("kube", func(b *testing.B) { saturate(b, 8, false) })
}

// BenchmarkDispatchScan: as Saturated with C = 1, so every request is
// dispatched by a scan over the 128 queues.
func BenchmarkDispatchScan(b *testing.B) {
	b.Run("pace", func(b *testing.B) { saturate(b, 1, true) })
	b.Run("kube", func(b *testing.B) { saturate(b, 1, false) })
}

// BenchmarkDeal: one hand of 6 from 128 queues.
func BenchmarkDeal(b *testing.B) {
	hashes := flowHashes()
	b.Run("pace", func(b *testing.B) {
		d, _ := pshuffle.NewDealer(benchQueues, benchHand)
		var buf [8]int
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d.DealIntoHand(hashes[i%benchFlows], buf[:0])
		}
	})
	b.Run("kube", func(b *testing.B) {
		d, _ := kshuffle.NewDealer(benchQueues, benchHand)
		var buf [8]int
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d.DealIntoHand(hashes[i%benchFlows], buf[:0])
		}
	})
}

// BenchmarkAllocate: the borrowing allocation for 8 levels, bounds binding.
func BenchmarkAllocate(b *testing.B) {
	items := []borrowing.Item{
		{Target: 300, LowerBound: 24, UpperBound: 845}, {Target: 13, LowerBound: 13, UpperBound: 613},
		{Target: 50, LowerBound: 50, UpperBound: 674}, {Target: 200, LowerBound: 73, UpperBound: 160},
		{Target: 25, LowerBound: 25, UpperBound: 625}, {Target: 49, LowerBound: 49, UpperBound: 698},
		{Target: 24, LowerBound: 24, UpperBound: 649}, {Target: 90, LowerBound: 30, UpperBound: 60},
	}
	b.Run("pace", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := borrowing.Allocate(602, items); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kube", func(b *testing.B) {
		k := toKube(items)
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := kubeAllocate(602, k); err != nil {
				b.Fatal(err)
			}
		}
	})
}
