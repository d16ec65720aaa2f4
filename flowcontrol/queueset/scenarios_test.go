package queueset

import (
	"fmt"
	"testing"
	"time"
)

// The scenarios of kube-apiserver's queueset_test.go (reference §8.2), with
// the same clients, limits, evaluation windows, margins and fairness outcomes.

const sec = time.Second

func TestNoRestraint(t *testing.T) {
	// Upstream uses a stand-in that dispatches everything; an exempt queue set is that.
	clients := []uniformClient{uc(1001001001, 5, 15, sec, sec), uc(2002002002, 2, 15, sec, sec/2)}
	for _, tc := range []struct {
		name   string
		limit  int
		margin float64
		fair   bool
	}{{"no-competition", 10, 0.001, true}, {"with-competition", 2, 0.25, false}} {
		t.Run(tc.name, func(t *testing.T) {
			runScenario(t, scenario{cfg: Config{Name: tc.name, Queues: Exempt}, limit: tc.limit, clients: clients,
				evalDuration: 18 * sec, margin: tc.margin, expectFair: []bool{tc.fair}, expectAll: true})
		})
	}
}

func TestBaseline(t *testing.T) {
	runScenario(t, scenario{cfg: Config{Name: "baseline", Queues: 9, QueueLengthLimit: 8, HandSize: 3}, limit: 1,
		clients: []uniformClient{uc(1001001001, 1, 21, sec, 0)}, evalDuration: 20 * sec,
		margin: 0, expectFair: []bool{true}, expectAll: true})
}

func TestExempt(t *testing.T) {
	for _, limit := range []int{0, 2} {
		t.Run(fmt.Sprintf("C=%d", limit), func(t *testing.T) {
			runScenario(t, scenario{cfg: Config{Name: "exempt", Queues: Exempt, QueueLengthLimit: 2, HandSize: 3}, limit: limit,
				clients: []uniformClient{uc(1001001001, 5, 20, sec, sec).width(3)}, evalDuration: 40 * sec,
				expectedAverages: []float64{7.5}, margin: 1e-8, expectFair: []bool{true}, expectAll: true})
		})
	}
}

func TestSeparations(t *testing.T) {
	type shape struct {
		finalSeats, limit, nClients int
	}
	shapes := []shape{{1, 1, 1}, {1, 2, 1}, {2, 2, 1}, {1, 1, 2}, {1, 2, 2}, {2, 2, 2}}
	for _, tc := range []struct {
		think, pad time.Duration
		expected   []float64 // per shape; every client of a shape expects the same
	}{
		{sec, 0, []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}},
		{0, sec, []float64{0.5, 1, 0.5, 0.25, 0.5, 0.25}},
		{sec, sec / 2, []float64{0.5, 0.5, 0.5, 1.0 / 3, 0.5, 1.0 / 3}},
		{sec / 2, sec, []float64{0.5, 2.0 / 3, 0.5, 0.25, 0.5, 0.25}},
	} {
		for i, sh := range shapes {
			name := fmt.Sprintf("think=%v,pad=%v,F=%d,C=%d,n=%d", tc.think, tc.pad, sh.finalSeats, sh.limit, sh.nClients)
			t.Run(name, func(t *testing.T) {
				var clients []uniformClient
				var expected []float64
				for c := range sh.nClients {
					clients = append(clients, uc(uint64(c+1)*1001001001, 1, 25, sec, tc.think).padded(sh.finalSeats, tc.pad))
					expected = append(expected, tc.expected[i])
				}
				runScenario(t, scenario{cfg: Config{Name: name, Queues: 9, QueueLengthLimit: 8, HandSize: 3}, limit: sh.limit,
					clients: clients, evalDuration: 24 * sec, expectedAverages: expected,
					margin: 0, expectFair: []bool{true}, expectAll: true})
			})
		}
	}
}

func TestUniformFlowsHandSize1(t *testing.T) {
	runScenario(t, scenario{cfg: Config{Name: "hand1", Queues: 9, QueueLengthLimit: 8, HandSize: 1}, limit: 4,
		clients:      []uniformClient{uc(1001001001, 8, 20, sec, sec-1), uc(2002002002, 8, 20, sec, sec-1)},
		evalDuration: 50 * sec, margin: 0.01, expectFair: []bool{true}, expectAll: true})
}

func TestUniformFlowsHandSize3(t *testing.T) {
	runScenario(t, scenario{cfg: Config{Name: "hand3", Queues: 8, QueueLengthLimit: 16, HandSize: 3}, limit: 4,
		clients:      []uniformClient{uc(400900100100, 8, 30, sec, sec-1), uc(300900200200, 8, 30, sec, sec-1)},
		evalDuration: 60 * sec, margin: 0.03, expectFair: []bool{true}, expectAll: true})
}

func TestDifferentFlowsExpectEqual(t *testing.T) {
	runScenario(t, scenario{cfg: Config{Name: "diffequal", Queues: 9, QueueLengthLimit: 8, HandSize: 1}, limit: 4,
		clients:      []uniformClient{uc(1001001001, 8, 20, sec, sec), uc(2002002002, 7, 30, sec, sec/2)},
		evalDuration: 40 * sec, margin: 0.01, expectFair: []bool{true}, expectAll: true})
}

func TestSeatSecondsRollover(t *testing.T) {
	const quarter = 91 * 24 * time.Hour
	runScenario(t, scenario{cfg: Config{Name: "rollover", Queues: 9, QueueLengthLimit: 8, HandSize: 1}, limit: 2000,
		clients: []uniformClient{
			uc(1001001001, 8, 20, quarter, quarter).width(500),
			uc(2002002002, 7, 30, quarter, quarter/2).width(500),
		},
		evalDuration: 40 * quarter, expectedAverages: []float64{1000, 1000}, margin: 0.01,
		expectFair: []bool{true}, expectAll: true, epochAdvances: 8})
}

func TestDifferentFlowsExpectUnequal(t *testing.T) {
	runScenario(t, scenario{cfg: Config{Name: "diffunequal", Queues: 9, QueueLengthLimit: 6, HandSize: 1}, limit: 3,
		clients:      []uniformClient{uc(1001001001, 4, 20, sec, sec-1), uc(2002002002, 2, 20, sec, sec-1)},
		evalDuration: 20 * sec, margin: 0.01, expectFair: []bool{true}, expectAll: true})
}

func TestDifferentWidths(t *testing.T) {
	runScenario(t, scenario{cfg: Config{Name: "widths", Queues: 64, QueueLengthLimit: 13, HandSize: 7}, limit: 6,
		clients: []uniformClient{
			uc(10010010010010, 13, 10, sec, sec-1),
			uc(20020020020020, 7, 10, sec, sec-1).width(2),
		},
		evalDuration: 20 * sec, margin: 0.155, expectFair: []bool{true}, expectAll: true})
}

func TestTooWide(t *testing.T) {
	runScenario(t, scenario{cfg: Config{Name: "toowide", Queues: 64, QueueLengthLimit: 35, HandSize: 7}, limit: 6,
		clients: []uniformClient{
			uc(40040040040040, 15, 21, sec, sec-1).width(2),
			uc(50050050050050, 15, 21, sec, sec-1).width(2),
			uc(60060060060060, 15, 21, sec, sec-1).width(2),
			uc(70070070070070, 15, 21, sec, sec-1).width(2),
			uc(90090090090090, 15, 21, sec, sec-1).width(7),
		},
		evalDuration: 400 * sec, margin: 0.35, expectFair: []bool{true}, expectAll: true})
}

func TestWindup(t *testing.T) {
	for _, tc := range []struct {
		name       string
		margin2    float64
		expectFair bool
	}{{"upper-bound", 0.26, true}, {"lower-bound", 0.1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			runScenario(t, scenario{cfg: Config{Name: "windup", Queues: 9, QueueLengthLimit: 6, HandSize: 1}, limit: 3,
				clients:      []uniformClient{uc(1001001001, 2, 40, sec, -1), uc(2002002002, 2, 40, sec, -1).splitHalves()},
				evalDuration: 40 * sec, margins: []float64{0.01, tc.margin2},
				expectFair: []bool{true, tc.expectFair}, expectAll: true})
		})
	}
}

func TestDifferentFlowsWithoutQueuing(t *testing.T) {
	runScenario(t, scenario{cfg: Config{Name: "noqueues", Queues: 0}, limit: 4,
		clients:      []uniformClient{uc(1001001001, 6, 10, sec, 57*time.Millisecond), uc(2002002002, 4, 15, sec, 750*time.Millisecond)},
		evalDuration: 13 * sec, margin: 0.20, expectFair: []bool{false}, expectAll: false, rejectReason: ConcurrencyLimit})
}
