// Package rediswq serves Pace's work queues over the Redis protocol, so that
// workers written for Asperathos — container images that read their job's
// queue from Redis with the rediswq protocol (BRPOPLPUSH, a lease key with
// a TTL, RPUSH of the result, LREM) — run unchanged on Pace. There is no
// Redis server: each command is mapped onto the job's JetStream work queue,
// so leases, redeliveries and the one result per item are the bus's own.
//
// A queue is named by its job's id on an open bus, and by its job's token
// (job:<job>:<mac>, what REDIS_QUEUE holds) on an authenticated one: the
// front then talks to the bus as that job's worker, and the NATS server
// keeps it to that job. docs/asperathos.md maps every command.
package rediswq
