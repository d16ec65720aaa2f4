// submit.mjs FILE: submit a job document (Pace's spec as JSON or YAML, or
// an Asperathos submission) on pace.submit and print its id. A refused
// document prints the manager's error as JSON on stderr and exits 3.
//   node examples/clients/node/submit.mjs examples/jobs/ingest.yaml
import { readFileSync } from "node:fs";
import { APIError, call, connectPace } from "./pace.mjs";

const file = process.argv[2];
if (!file) {
  console.error("usage: node submit.mjs FILE");
  process.exit(2);
}
const doc = readFileSync(file);
const yaml = /\.ya?ml$/.test(file);
const nc = await connectPace();
try {
  const reply = await call(nc, "pace.submit", doc, { contentType: yaml ? "application/yaml" : "application/json" });
  console.log(reply.job_id);
} catch (err) {
  if (!(err instanceof APIError)) throw err;
  console.error(JSON.stringify(err.body));
  process.exitCode = 3;
} finally {
  await nc.close();
}
