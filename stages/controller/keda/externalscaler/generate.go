// Package externalscaler is the Go code protoc generates from
// externalscaler.proto, KEDA's external-scaler gRPC interface.
package externalscaler

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative externalscaler.proto
