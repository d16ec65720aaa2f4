// result.mjs JOB ID TEXT: publish a result for item ID, as a worker does, to
// show that PACE_RESULTS keeps one per item: for an item that has one, the
// server answers "maximum messages per subject exceeded" (JetStream error
// 10077), printed on stderr with exit code 1. It sends no Nats-Msg-Id: with
// the worker's (JOB/ID) the server would, within its 2-minute duplicate
// window, acknowledge it as a duplicate of the stored result instead.
import { JetStreamApiError, jetstream } from "@nats-io/jetstream";
import { connectPace } from "./pace.mjs";

const [job, id, text] = process.argv.slice(2);
if (!text) {
  console.error("usage: node result.mjs JOB ID TEXT");
  process.exit(2);
}
const nc = await connectPace();
try {
  const js = jetstream(nc, { timeout: 10_000 });
  const result = { item_id: id, job, result: text };
  const ack = await js.publish(`pace.results.${job}.${id}`, JSON.stringify(result));
  console.log(`${id}: stored as ${ack.stream} #${ack.seq}`);
} catch (err) {
  // A JetStreamApiError's code is the JetStream error code (10077 here).
  const code = err instanceof JetStreamApiError ? ` (JetStream error ${err.code})` : "";
  console.error(`result ${id}: ${err.message}${code}`);
  process.exitCode = 1;
} finally {
  await nc.close();
}
