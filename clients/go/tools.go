//go:build tools

// Package tools pins the protoc plugins that `make generate` runs (buf.gen.go.yaml): go.mod holds
// their versions, so `make setup` builds the same protoc-gen-go and protoc-gen-go-grpc everywhere.
package tools

import (
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
