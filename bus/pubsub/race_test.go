//go:build race

package pubsub_test

// raceEnabled: the race detector slows the server and the subscriber ten
// times; the universal tests then run their short variants.
const raceEnabled = true
