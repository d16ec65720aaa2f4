package bus

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// Conflict reports whether err is JetStream refusing a write whose expected
// last sequence (a KV revision, or 0 for "first on its subject") was not
// the current one: another writer came first. Single-replica streams say
// so with error code 10071, replicated ones with 10164, and the KV API
// maps them to ErrKeyExists (Create) or ErrKeyRevisionMismatch (Update,
// Delete with a revision); all of them count.
func Conflict(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return true
	case errors.As(err, &apiErr):
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}
