// Package chaos runs Pace as separate processes on a real three-server NATS
// cluster on loopback and kills them at random while a job runs: workers,
// stage processes and NATS servers are SIGKILLed and restarted, then the
// whole system at once, and every item must still have exactly one result.
//
// The harness (binaries, processes, the NATS cluster) is ordinary code so
// that it is vetted and linted with the rest; the test itself has the build
// tag chaos and runs with `task chaos`, not with `go test ./...`.
package chaos
