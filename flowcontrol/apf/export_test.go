package apf

// PublishPeaks does what Gate.Run does every second of the gate's clock:
// it publishes the last-second peaks and samples the ratio histograms. Tests
// call it to take that second's figures without racing Run's ticker.
func PublishPeaks(g *Gate) { g.metrics.tick(g) }
