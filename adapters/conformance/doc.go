// Package conformance checks an adapter against the execution-adapter contract.
//
// Plugin authors run it from their own tests, against an adapter in process or against
// a remote endpoint through adapterhttp.Client:
//
//	func TestConformance(t *testing.T) {
//		conformance.Test(t, myAdapter, conformance.Options{})
//	}
//
// The same checks back `differently-server adapter conformance --endpoint URL`.
//
// The suite creates real instances under a fresh installation ID and deletes them at
// the end. It covers the checklist of the adapter specification: idempotent Create
// (sequential, after a call cancelled in flight, and concurrent), Get and Delete of missing
// instances, List filtered by installation, Exec semantics (exit codes, stderr, env,
// cwd, stdin, timeouts, output caps), and one check per declared feature. For every
// optional interface the adapter implements but does not declare, the call must answer
// unsupported_operation.
//
// What a generic suite cannot provoke (a full backend, an outage, rejected
// credentials) belongs in the adapter's own tests.
package conformance
