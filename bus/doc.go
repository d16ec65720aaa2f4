// Package bus moves Pace's messages over NATS JetStream.
//
// It starts an embedded NATS server or connects to an external one
// ([StartServer], [Connect]), provisions every stream, consumer, key-value
// bucket and object store idempotently ([Client.Provision]), carries schema, correlation and
// trace metadata in headers ([Publish], [Decode]), and offers the client SDK
// that users embed: [Client.PushItems], [Client.Worker] and [Outputs.Results].
//
// Work-item semantics (see docs/bus.md):
//   - main queue = items not yet delivered, processing = delivered and not
//     acknowledged, results = the results stream;
//   - an item's lease is its job's item timeout (the consumer's AckWait);
//     healthy workers extend it with in-progress acknowledgements, and an
//     item whose lease expires is delivered to another worker;
//   - each item has exactly one result: the result subject holds one message
//     per item and the server refuses a second one;
//   - after the job's maximum deliveries an item is moved to the dead-letter
//     subject with the reason and the last error; malformed messages too,
//     byte for byte (a body too large for its letter in the dead-letter
//     object store, written before the letter: [Letters.Body]).
package bus
