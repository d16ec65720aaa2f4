// submit-push.mjs FILE PAYLOAD...: submit a streaming job and push items to
// it, showing that a connection's rights are fixed when it connects: with a
// tenant's token, the connection that submitted the job may not publish to
// the new job's queue (the server answers a permissions violation; an
// admin's token reaches every job), so the items go on a new connection.
// Prints the job id, what the old connection was told, then one line per
// item.
//   node examples/clients/node/submit-push.mjs examples/jobs/ingest.yaml one two
import { readFileSync } from "node:fs";
import { jetstream } from "@nats-io/jetstream";
import { call, connectPace } from "./pace.mjs";

const [file, ...payloads] = process.argv.slice(2);
if (!file) {
  console.error("usage: node submit-push.mjs FILE PAYLOAD...");
  process.exit(2);
}
const push = (js, job, i, payload) =>
  js.publish(`pace.work.${job}`, JSON.stringify({ id: `item-${i}`, job, payload }), { msgID: `${job}/item-${i}` });

let nc = await connectPace();
const contentType = /\.ya?ml$/.test(file) ? "application/yaml" : "application/json";
const { job_id: job } = await call(nc, "pace.submit", readFileSync(file), { contentType });
console.log(job);
const old = await push(jetstream(nc), job, 0, "on the old connection").then(
  (ack) => `stored as ${ack.stream} #${ack.seq}`, // an admin's token
  (err) => err.message, // Permissions Violation for Publish to "pace.work.<job>"
);
console.log(`old connection: ${old}`);
await nc.close();

nc = await connectPace(); // now the job is the user's: granted at this connect
const js = jetstream(nc);
for (const [i, payload] of payloads.entries()) {
  const ack = await push(js, job, i + 1, payload);
  console.log(`item-${i + 1}: ${ack.stream} #${ack.seq}`);
}
await nc.close();
