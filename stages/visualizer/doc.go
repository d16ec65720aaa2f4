// Package visualizer serves Pace's built-in web UI at /ui/: a jobs list
// and a job page that update live over Server-Sent Events, read from the
// bus and authorised like the job API (the caller sees the jobs the
// manager lets it see). Charts are SVG rendered on the server and sent in
// the events, so the page needs no chart library and no CDN; the static
// files are embedded with go:embed. Commands (stop, terminate) go through
// the job API with the caller's bearer token. See docs/ui.md.
package visualizer
