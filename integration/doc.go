// Package integration holds end-to-end tests of Pace against real
// components started by the tests themselves: embedded NATS JetStream and a
// real kube-apiserver with etcd (built from the Go module proxy by
// kubetools/build.sh, once per machine).
package integration
