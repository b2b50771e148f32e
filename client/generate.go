package client

//go:generate go tool oapi-codegen -config oapi.yaml ../api/openapi.yaml
