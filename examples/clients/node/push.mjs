// push.mjs JOB ID=PAYLOAD...: push items to a streaming job's queue,
// pace.work.JOB, each a work_item with a Nats-Msg-Id of JOB/ID, and wait for
// the server's acknowledgement of each. An item sent again within the
// stream's duplicate window (2 minutes) is acknowledged as a duplicate and
// stored once. Exits 1 on the first item the server refuses.
//   node examples/clients/node/push.mjs "$job" a=hello b=world
import { headers } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { connectPace } from "./pace.mjs";

const [job, ...args] = process.argv.slice(2);
if (!job || args.length === 0) {
  console.error("usage: node push.mjs JOB ID=PAYLOAD...");
  process.exit(2);
}
const nc = await connectPace(); // after the job exists: rights are fixed at connect
const js = jetstream(nc, { timeout: 10_000 });
try {
  for (const arg of args) {
    const eq = arg.indexOf("=");
    const id = arg.slice(0, eq), payload = arg.slice(eq + 1);
    const item = { id, job, payload, created_at: new Date().toISOString() };
    const h = headers();
    h.set("Pace-Schema", "work_item"); // optional; checked when present
    h.set("Pace-Schema-Version", "1");
    const ack = await js.publish(`pace.work.${job}`, JSON.stringify(item), { msgID: `${job}/${id}`, headers: h });
    console.log(`${id}: ${ack.duplicate ? "duplicate of" : "stored as"} ${ack.stream} #${ack.seq}`);
  }
} catch (err) {
  console.error(`push to ${job}: ${err.message}`);
  process.exitCode = 1;
} finally {
  await nc.close();
}
