// Package local runs a job's worker replicas as processes on this machine.
//
// It is the actuator of `pace up`: no cluster is needed. A replica is either
// `pace worker JOB --exec CMD` (the job runs CMD once per item, item on
// stdin, as Asperathos' local mode) or the job's own worker command with
// PACE_NATS_URL and PACE_JOB in its environment, speaking the queue protocol
// itself (for example through the Go SDK).
//
// Scaling down sends SIGTERM to the newest replicas: a Pace worker stops
// fetching, finishes or returns its items and exits 0; after the grace
// period it is killed. A replica that exits on its own is restarted with an
// exponential backoff (1 s doubling to 30 s, reset after 30 s of healthy
// running). Terminate kills every replica of a job at once. Replicas are in
// their own process group and, on Linux, are killed if Pace itself dies, so
// no orphan is left behind.
package local
