// pace.mjs: connecting to Pace's NATS with a Pace token, and its
// request/reply calls, for the other examples of this directory
// (docs/clients.md explains each step).
import { createHash } from "node:crypto";
import { connect, headers } from "@nats-io/transport-node";

// inboxPrefix is bus.InboxPrefix: "_INBOX." and the first 16 hex digits of
// the token's SHA-256. The server lets a token's holder subscribe under it
// alone, so a client that keeps the default "_INBOX." gets no replies.
export function inboxPrefix(token) {
  return "_INBOX." + createHash("sha256").update(token).digest("hex").slice(0, 16);
}

// connectPace connects with the token, to PACE_NATS_URL (default
// nats://127.0.0.1:4222). Its rights are fixed now: the jobs the token's
// user owns at this moment.
export async function connectPace(token = process.env.PACE_TOKEN) {
  if (!token) throw new Error("set PACE_TOKEN to a Pace token (a line of pace up's --token-file)");
  return connect({
    servers: process.env.PACE_NATS_URL ?? "nats://127.0.0.1:4222",
    token,
    inboxPrefix: inboxPrefix(token),
    name: "pace-node-example",
  });
}

// APIError is the manager's error envelope: error_code (an HTTP status),
// error_message, error_name and, for invalid documents, details: one
// {field, type, detail, value} per invalid field.
export class APIError extends Error {
  constructor(body) {
    super(body.error_message);
    this.body = body;
  }
}

// call sends a request to the manager (pace.submit, pace.control.*) with
// the Authorization header it identifies the caller by, and returns the
// reply ({job_id, status}; {stream, consumer} for pace.control.read), or
// throws an APIError.
export async function call(nc, subject, body, { token = process.env.PACE_TOKEN, contentType } = {}) {
  const h = headers();
  h.set("Authorization", `Bearer ${token}`);
  if (contentType) h.set("Content-Type", contentType);
  const reply = await nc.request(subject, body, { headers: h, timeout: 10_000 });
  const data = reply.json();
  if (data.error_code !== undefined) throw new APIError(data);
  return data;
}
