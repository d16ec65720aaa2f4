// Package execpool runs a job's items through long-lived processes, one item
// per line, instead of forking a command per item: what `pace worker --exec
// CMD --exec-mode lines|json` does, as Hadoop Streaming and GNU parallel
// --pipe do. A Pool starts `sh -c CMD` when an item needs a process and none
// is idle, at most one process per concurrency slot (Config.Processes), and
// keeps it for item after item: the fork and the command's start-up are paid
// once, not per item. PerItem is the plain way, the item mode: a process per
// item, payload in, result out.
//
// # Protocol
//
// An item is one line on the process's standard input and its answer one
// line on its standard output, in order: one answer per item, written and
// flushed before the process waits for the next line. Programs that buffer
// their output when it is a pipe (tr, grep, sed, awk, python, most C
// programs) never answer: run them under `stdbuf -oL`, or use `sed -u`,
// `grep --line-buffered`, `python -u`, `jq --unbuffered`, gawk's fflush(),
// or `mawk -W interactive` (mawk buffers its input too, so fflush() is not
// enough).
//
//   - Lines: the line is the item's payload, which must not contain a
//     newline (such an item fails with ErrNewline); the answer line, without
//     its "\n" or "\r\n", is the result. Nothing links an answer to its item
//     but the order, so a command that writes no line or two lines for an
//     item breaks the pairing (see below); use JSON when it might.
//   - JSON: the line is {"id":ID,"payload":PAYLOAD} and the answer
//     {"id":ID,"result":RESULT} or {"id":ID,"error":ERROR}, with the item's
//     ID. A string RESULT is the result as is, any other JSON value but null
//     its compact JSON text; an ERROR (a string, or any JSON value but null and
//     "") fails the item, and so does an answer with neither, but the process
//     keeps serving. A line that is not a JSON object (its first byte but
//     blanks is not '{') is output of the process's own, logged as its
//     item's ("item stdout"), and the answer is still awaited. Payloads
//     that are not valid UTF-8 are sent with U+FFFD in place of the invalid
//     bytes, as encoding/json does.
//
// # Failures
//
// A process is out of step, and is stopped, when it exits or closes its
// output, when its answer is longer than 8 MiB, and in JSON mode when its
// answer is not valid JSON or carries another item's id. The item it held
// fails with an error wrapping ErrProcessFailed, holding the exit status and
// the end of the process's standard error when it exited. So does an item
// whose context ends while its process works on it (the worker gave up on
// it, or is shutting down): the process, which may hang, is stopped. The next
// item starts a fresh process. A failed item is the caller's to retry:
// bus.Worker returns it to the queue after a delay and dead-letters it once
// its deliveries are used up, as it does with any failure, and stores each
// item's result once however often it is tried.
//
// An idle process found exited, or with a line no item asked for waiting on
// its output, is stopped before it gets an item (so a process that answers
// twice is caught at the next item, unless its extra line comes late). A
// process that has not answered an item for StallWarning is logged once:
// it may buffer its output.
//
// # Processes
//
// Each process gets Config.Env; its standard error is logged a record per
// line ("item stderr") with the id of the item it holds, at most a
// lines.Budget an item, and read up to its answer before the process gets
// its next item. A process is its own process group, so that stopping it
// reaches the programs its shell started: its standard input is closed, the
// group gets SIGTERM, and SIGKILL once the process has exited or KillDelay
// (or what SetKillDelay set) later (on Linux the kernel also kills the
// process if the worker dies).
//
// Handle is safe for concurrent use; each call holds one process for its
// item. Every goroutine of a process (a reader of its output, a reaper, a
// stopper) ends within about KillDelay of the process being stopped, and
// Close stops every process and waits for them.
package execpool
