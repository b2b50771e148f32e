package store

// Modules the daemon's packages are being written against; removed once they import them.
import (
	_ "github.com/go-chi/chi/v5"
	_ "github.com/goccy/go-yaml"
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/prometheus/client_golang/prometheus"
)
