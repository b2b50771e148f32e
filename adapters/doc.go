// Package adapters is the execution-adapter contract: the interfaces an adapter
// implements, the types that cross it, the feature names a pool can advertise and the
// error helpers whose codes drive the control plane's reactions.
//
// An adapter creates and manages sandbox instances on one backend. The control plane
// holds one adapter per pool and calls it from several places: the pool manager
// (Capabilities, Capacity, Health every few seconds on every replica), the scheduler
// (Create, Delete), the reconciler (List) and the API (Exec and the optional
// operations). Every method may be called concurrently.
//
// # Writing an adapter
//
// Implement ExecutionAdapter, then any of the optional interfaces (Streamer,
// FileSystem, Lifecycle, Pauser, Snapshotter, PortExposer) your backend supports, and
// declare the matching feature names in Capabilities. A feature whose interface is
// missing is dropped by EffectiveFeatures, so declaring too much is harmless; an
// interface whose feature is not declared is never called. A Streamer that can hand
// out its output as bytes may also implement ByteStreamer, which the NDJSON writers
// of the API and of the protocol prefer.
//
// Three rules carry most of the weight:
//
//   - Create is idempotent on CreateRequest.ID: look for an instance of that sandbox
//     first and return it. A lost response or a control-plane crash must never lead to
//     a second instance.
//   - Delete of a missing instance succeeds.
//   - List returns every instance of the installation, or an error. Never a partial
//     list: the reconciler deletes what it does not know and fails what it cannot see.
//
// Return errors built with the helpers in this package (NotFound, Unsupported,
// Unavailable, InsufficientCapacity, SandboxFailed, InvalidRequest, InvalidState); the
// code decides whether the scheduler retries, backs off or gives up.
//
// The conformance suite in package conformance checks all of this against a live
// adapter, in process or behind the HTTP protocol of package adapterhttp.
package adapters
