// Package conformance holds differential tests and side-by-side benchmarks
// that run Pace's flowcontrol engine and kube-apiserver's
// k8s.io/apiserver/pkg/util/flowcontrol on the same inputs. It is a separate
// module so that the main module does not depend on k8s.io/apiserver.
//
// Run it with:
//
//	cd flowcontrol/conformance && go test ./...
//	cd flowcontrol/conformance && go test -bench . -benchmem -run '^$'
package conformance
