// stop.mjs JOB: stop a job (pace.control.stop): a streaming job takes no new
// items and drains its queue, then its state is "stopped". Prints the
// reply's status; a refusal (404 for a job that is not the caller's) prints
// the error on stderr and exits 3.
import { APIError, call, connectPace } from "./pace.mjs";

const job = process.argv[2];
if (!job) {
  console.error("usage: node stop.mjs JOB");
  process.exit(2);
}
const nc = await connectPace();
try {
  const reply = await call(nc, "pace.control.stop", JSON.stringify({ job_id: job }));
  console.log(reply.status);
} catch (err) {
  if (!(err instanceof APIError)) throw err;
  console.error(JSON.stringify(err.body));
  process.exitCode = 3;
} finally {
  await nc.close();
}
