// Package deploy tests Pace's deployment files against the real tools that
// consume them: deploy/kubernetes rendered by kustomize and applied with
// server-side dry-run to a real kube-apiserver (its validation, strict field
// checking and restricted Pod Security admission), each stage's arguments
// parsed by the real pace binary, the NATS StatefulSet's configuration
// loaded by nats-server's own parser, and the Dockerfile's build reproduced:
// the binary must be static and run as a non-root user.
package deploy
