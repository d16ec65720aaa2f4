// Package targets executes the infrastructure requests the gate admits, on
// the targets where jobs' workers run.
//
// A job's spec names its target (actuator.name: "local" when empty,
// "kubernetes"). Each target is a package of its own (targets/local,
// targets/kubernetes) that registers itself (Register: its flags, their
// check, its Opener); the gate's leader opens the targets its flags enable,
// by name, with Open, and nothing else in Pace knows one target from
// another. Adding a target is one package and the line that imports it.
//
// The Executor runs admitted requests with a runtime (the local process
// runtime, or Kubernetes) and, when the count changed from the job record's,
// publishes a scaled job event with the new count and updates the record.
// A scale that changed nothing is not announced: the collector would sample
// the job on it and the controller decide again, a loop (issue 19). A runtime that
// retries notes each retry (NoteRetry), and the request's outcome lists
// them in its reason, e.g. "2 retries (conflict 1, server error 1)".
package targets
