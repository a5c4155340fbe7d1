package client

// The client is generated from openapi.yaml; `make generate` reruns this
// and `make verify` fails when client.gen.go is stale.
//go:generate go tool oapi-codegen -config oapi-codegen.yaml -o client.gen.go ../../openapi.yaml
