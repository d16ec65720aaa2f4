package rediswq

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// kind is which of a queue's keys a Redis key is.
type kind int

const (
	mainList       kind = iota // <q>: the items waiting
	processingList             // <q>:processing: the items leased here
	resultsList                // <q>:results: results of leased items
	errorsList                 // <q>:errors: errors of leased items
	leaseKey                   // <q>:leased_by_session:<sha224(item)>
)

// key is a parsed Redis key: the queue it belongs to, and which key of it.
type key struct {
	queue string
	kind  kind
	hash  string // leaseKey: the item's sha224, hex
}

const leasePrefix = ":leased_by_session:"

// parseKey reads a key of the rediswq protocol. A queue is named by its job
// (or its job's token, which contains colons but never one of the suffixes).
func parseKey(s string) (key, error) {
	if i := strings.LastIndex(s, leasePrefix); i > 0 {
		h := s[i+len(leasePrefix):]
		if len(h) != 2*sha256.Size224 {
			return key{}, fmt.Errorf("lease key %q: want %s<sha224 of the item, hex>", s, leasePrefix)
		}
		return key{queue: s[:i], kind: leaseKey, hash: strings.ToLower(h)}, nil
	}
	for suffix, k := range map[string]kind{":processing": processingList, ":results": resultsList, ":errors": errorsList} {
		if q, ok := strings.CutSuffix(s, suffix); ok && q != "" {
			return key{queue: q, kind: k}, nil
		}
	}
	if s == "" {
		return key{}, fmt.Errorf("empty key")
	}
	return key{queue: s, kind: mainList}, nil
}

// itemHash is the hash rediswq names an item's lease key by.
func itemHash(payload string) string {
	h := sha256.Sum224([]byte(payload))
	return hex.EncodeToString(h[:])
}
