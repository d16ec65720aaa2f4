// follow.mjs STREAM SUBJECT COUNT [SECONDS]: print the first COUNT messages
// of STREAM on SUBJECT as JSON lines, waiting for those not yet stored, for
// at most SECONDS (default 60; exit 1 when they did not come).
//
// A tenant may not create consumers: it asks the manager for one on
// pace.control.read ({stream, filter_subject, deliver_policy}), which checks
// the filter is within a job the caller may read and answers with the name
// of a pull consumer without acknowledgements, deleted after a minute
// unread. The client reads it by name, through the JetStream API prefix of
// the answer (its own, pace.reader.<id>): no caller may use $JS.API on it.
//   node examples/clients/node/follow.mjs PACE_RESULTS "pace.results.$job.*" 3
import { jetstream } from "@nats-io/jetstream";
import { call, connectPace } from "./pace.mjs";

const [stream, subject, count, seconds = "60"] = process.argv.slice(2);
if (!count) {
  console.error("usage: node follow.mjs STREAM SUBJECT COUNT [SECONDS]");
  process.exit(2);
}
const nc = await connectPace();
try {
  const reader = await call(nc, "pace.control.read", JSON.stringify({ stream, filter_subject: subject }));
  const js = jetstream(nc, { apiPrefix: reader.api_prefix });
  const consumer = await js.consumers.get(reader.stream, reader.consumer);
  const deadline = Date.now() + Number(seconds) * 1000;
  let got = 0;
  while (got < Number(count) && Date.now() < deadline) {
    const msg = await consumer.next({ expires: Math.min(5_000, Math.max(1_000, deadline - Date.now())) });
    if (msg === null) continue; // nothing new yet
    console.log(JSON.stringify(msg.json()));
    got++;
  }
  if (got < Number(count)) {
    console.error(`${stream} ${subject}: ${got} of ${count} messages in ${seconds} s`);
    process.exitCode = 1;
  }
} catch (err) {
  console.error(`follow ${stream} ${subject}: ${err.message}`);
  process.exitCode = 1;
} finally {
  await nc.close();
}
