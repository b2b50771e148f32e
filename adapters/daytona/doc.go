// Package daytona is the execution adapter for Daytona (https://www.daytona.io), a
// hosted sandbox provider. It speaks Daytona's public REST API for the sandbox
// lifecycle and each sandbox's toolbox (reached through the toolbox proxy) for
// commands and files.
//
// The adapter is written against Daytona's published OpenAPI descriptions and tested
// against an in-memory server built from them (package daytonafake); it has not been
// run against the live service. Trust is always external: sandboxes run on Daytona's
// infrastructure.
//
// How the contract maps onto Daytona:
//
//   - Ref is Daytona's sandbox ID. The sandbox's name is the Differently sandbox ID,
//     and the ownership labels are stored as Daytona labels. Create first looks the
//     sandbox up by label, so a retried Create finds the first attempt's sandbox; two
//     racing Creates collide on the name and the loser adopts the winner's sandbox.
//   - Resources are not sent: a Daytona sandbox gets the size of its snapshot.
//     Differently's quota and cost accounting still use the requested size.
//   - The TTL becomes Daytona's ttlMinutes backstop, and auto-stop is switched off
//     (autoStopInterval 0) so that only Differently stops sandboxes.
//   - Exec uses the toolbox's process/execute, which returns stdout and stderr as one
//     combined text and has no stdin. Combined output is reported as stdout and
//     documented in Info.Description; a request with stdin answers
//     unsupported_operation.
//   - Pause and resume, and memory snapshots, exist only for the linux-vm class.
package daytona
