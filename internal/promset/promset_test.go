package promset_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/internal/promset"
)

// A set registers as one collector and gathers each of its metrics.
func TestSet(t *testing.T) {
	a := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "a"})
	b := prometheus.NewGauge(prometheus.GaugeOpts{Name: "b", Help: "b"})
	a.Add(2)
	b.Set(5)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(promset.Set{a, b}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if len(got) != 2 || got["a_total"] != 2 || got["b"] != 5 {
		t.Errorf("gathered %v, want a_total 2 and b 5", got)
	}
}
