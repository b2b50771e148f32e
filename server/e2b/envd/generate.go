package envd

// The Go code of envd's Connect services in gen/ comes from proto/; see proto/README.md.
//go:generate go run ./internal/protogen -module github.com/different-ai/differently -out ../../.. -M process.proto=github.com/different-ai/differently/server/e2b/envd/gen/processpb;processpb -M filesystem.proto=github.com/different-ai/differently/server/e2b/envd/gen/filesystempb;filesystempb process.proto filesystem.proto
