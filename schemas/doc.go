// Package schemas defines every message Pace puts on the bus: its Go type, its
// subject, its schema name and version, and its validation.
//
// The subjects and message schemas are Pace's public API: programs in any
// language publish job events and work items and subscribe to results and
// decisions. JSON Schema documents generated from these types live in
// schemas/jsonschema and are checked to be current by the package tests.
//
// Nothing here does I/O or imports NATS; package bus moves these messages.
package schemas
