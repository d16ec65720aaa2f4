// Package shufflesharding deals a hand of distinct queue indexes ("cards")
// from a deck for a flow's 64-bit hash value.
//
// The hash is read as a mixed-radix number: digit i is V mod (deck−i), then
// V /= deck−i. Digit 0 is the first card; each later digit is turned into a
// card not yet dealt by walking the earlier raw digits from the latest to the
// first and incrementing the candidate whenever it is not below the digit.
// This is exactly kube-apiserver's k8s.io/apiserver/pkg/util/shufflesharding
// (reference §2.1–2.2), so a flow lands in the same queues in Pace and in
// Kubernetes; the conformance module checks it on 100k+ random cases.
//
// A deck and hand are accepted only if ceil(log2(deck)×hand) ≤ 60 bits, which
// keeps the last card's bias below 32:33. Validation errors carry the same
// texts as upstream.
package shufflesharding
