# syntax=docker/dockerfile:1
# Pace's container image: one static binary, run as a non-root user on a
# distroless base (CA certificates and /etc/passwd, no shell, no libc).
#
#   docker build -t pace:dev --build-arg VERSION=$(git describe --tags --always) .
#   docker run --rm pace:dev stage manager --help
#
# integration/deploy builds the binary with this file's ENV and go build line
# and checks that it is static and runs as uid 65532.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/pace ./cmd/pace

# The :nonroot tag runs as uid/gid 65532; USER repeats it so that a
# Kubernetes runAsNonRoot check can verify it from the image metadata.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pace /pace
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/pace"]
