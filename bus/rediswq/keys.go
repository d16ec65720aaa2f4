package rediswq

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// kind is which of a job's keys a Redis key is.
type kind int

const (
	privateKey     kind = iota // any other key: the job's private keyspace
	mainList                   // <q>: the items waiting
	processingList             // <q>:processing: the items leased here
	resultsList                // <q>:results: the job's results
	errorsList                 // <q>:errors: errors workers reported
	leaseKey                   // <q>:leased_by_session:<sha224(item)>
)

const leasePrefix = ":leased_by_session:"

var suffixes = map[string]kind{"": mainList, ":processing": processingList, ":results": resultsList, ":errors": errorsList}

// key is a Redis key as a connection bound to a job reads it.
type key struct {
	kind kind
	// name is where the key is stored in the job's keyspace: keys of the
	// queue are stored under the job's id, whichever name (id or token)
	// the client used, so that all of a job's clients share them.
	name string
	hash string // leaseKey: what follows the prefix (an item's sha224, hex)
}

// classify reads k for a connection whose queue is called by names (its
// job's token, and its id once the connection has authenticated).
func classify(k, job string, names []string) key {
	for _, n := range names {
		rest, ok := strings.CutPrefix(k, n)
		if !ok {
			continue
		}
		if kind, ok := suffixes[rest]; ok {
			return key{kind: kind, name: job + rest}
		}
		if h, ok := strings.CutPrefix(rest, leasePrefix); ok {
			return key{kind: leaseKey, name: job + rest, hash: strings.ToLower(h)}
		}
	}
	return key{kind: privateKey, name: k}
}

// queueName returns the name of the queue a key belongs to when it is one
// of a queue's keys: rediswq's suffixes stripped.
func queueName(k string) string {
	if i := strings.LastIndex(k, leasePrefix); i > 0 {
		return k[:i]
	}
	for suffix := range suffixes {
		if q, ok := strings.CutSuffix(k, suffix); ok && suffix != "" && q != "" {
			return q
		}
	}
	return k
}

// itemHash is the hash rediswq names an item's lease key by.
func itemHash(payload string) string {
	h := sha256.Sum224([]byte(payload))
	return hex.EncodeToString(h[:])
}
