// Package store is the daemon's persistence seam: one documented interface (Store), the
// domain types it stores, and the errors it returns. Two drivers implement it and one
// shared suite (package storetest) checks both:
//
//   - store/postgres (pgx): production and every multi-replica deployment.
//   - store/sqlite (modernc.org/sqlite, pure Go): the single-node default, a durable file.
//
// Package store/open picks a driver from a database URL.
//
// # Rules every driver keeps
//
// Time: the store never reads the clock. Every operation whose result depends on time (or
// that stamps a row) takes "now" from the caller, so the scheduler, reconciler and leader
// election can be tested with an injected clock. Timestamps are stored in UTC with
// microsecond precision and come back as UTC (see Timestamp), identically on both drivers.
//
// Errors: driver errors are translated once, at the driver's boundary. A missing row is an
// *api.Error with api.CodeNotFound, a uniqueness conflict (or a version mismatch, or a
// refused delete) is api.CodeInvalidState, malformed input such as a bad cursor is
// api.CodeInvalidRequest; anything else is a plain wrapped error. No pgx.ErrNoRows or
// sql.ErrNoRows escapes a driver.
//
// Atomicity: every change of a sandbox goes through UpdateSandbox, which reads, modifies
// and writes the row in one transaction with the row locked, so a crash never leaves half
// a change and concurrent writers never lose an update.
//
// JSON values (Pool.Config, Policy.Defaults) are stored as JSON and decoded with
// encoding/json: numbers come back as float64, nested objects as map[string]any and
// arrays as []any. A nil map or slice comes back nil and an empty one empty.
package store
