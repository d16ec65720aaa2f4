// Package visualizer serves Pace's built-in web UI at /ui/: a jobs list
// and a job page that update live over Server-Sent Events, read from the
// bus and authorised like the job API (the caller sees the jobs the
// manager lets it see). Charts are SVG rendered on the server and sent in
// the events, so the page needs no chart library and no CDN; the static
// files are embedded with go:embed. Commands (stop, terminate) go through
// the job API with the caller's bearer token. The event streams live
// outside API Priority and Fairness, so they bound themselves: a bearer
// token is needed unless the UI is open (no token file), each user may
// have Config.MaxStreamsPerUser open and the server Config.MaxStreams
// (429 beyond), and they share one reader of the job events (Run) instead
// of a JetStream consumer each. See docs/ui.md.
package visualizer
