// Package promset groups Prometheus collectors into one, so that a stage's
// metrics register as a single collector.
package promset

import "github.com/prometheus/client_golang/prometheus"

// Set is a prometheus.Collector made of others; it describes and collects
// each in turn.
type Set []prometheus.Collector

// Describe implements prometheus.Collector.
func (s Set) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s Set) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s {
		c.Collect(ch)
	}
}
