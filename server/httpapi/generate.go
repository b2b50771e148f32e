package httpapi

//go:generate go tool oapi-codegen -config oapi.yaml ../../api/openapi.yaml
