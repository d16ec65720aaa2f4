// push-many.mjs JOB N [WINDOW]: push N items to a streaming job's queue as
// fast as JetStream stores them: publishes are asynchronous, each with its
// Nats-Msg-Id (JOB/i<k>), and at most WINDOW (default 256) wait for their
// acknowledgement at a time. It prints the rate, and exits 1 if any item
// was refused (once every publish sent has been answered).
//   node examples/clients/node/push-many.mjs "$job" 50000
import { jetstream } from "@nats-io/jetstream";
import { connectPace } from "./pace.mjs";

const [job, count, window = "256"] = process.argv.slice(2);
const n = Number(count), w = Number(window);
if (!job || !(n > 0) || !(w > 0)) {
  console.error("usage: node push-many.mjs JOB N [WINDOW]");
  process.exit(2);
}
const nc = await connectPace(); // after the job exists: rights are fixed at connect
const js = jetstream(nc, { timeout: 10_000 });
const waiting = new Set();
let refused = null;
const start = performance.now();
for (let i = 0; i < n && !refused; i++) {
  const id = `i${i}`;
  const item = JSON.stringify({ id, job, payload: `item ${i}` });
  const p = js.publish(`pace.work.${job}`, item, { msgID: `${job}/${id}` })
    .catch((err) => { refused ??= err; })
    .finally(() => waiting.delete(p));
  waiting.add(p);
  if (waiting.size >= w) await Promise.race(waiting);
}
await Promise.all(waiting);
const seconds = (performance.now() - start) / 1000;
if (refused) {
  console.error(`push to ${job}: ${refused.message}`);
  process.exitCode = 1;
} else {
  console.log(`${n} items in ${seconds.toFixed(2)} s: ${Math.round(n / seconds)} items/s`);
}
await nc.close();
