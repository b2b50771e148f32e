// Package storetest is the conformance suite every store.Store driver passes. A driver's
// own test calls Run with a Driver that makes fresh, isolated stores; the suite then
// checks every operation of the interface, its error codes, the round-trip of every
// field, and the concurrency guarantees (idempotent create, locked updates, exclusive
// claims, leases) with real goroutines on real connections.
//
// Time is injected: the suite passes its own "now" values and never sleeps.
package storetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// Driver makes stores for the suite.
type Driver struct {
	// New returns a fresh, empty store on its own database (file, schema, ...), closed
	// and removed by t.Cleanup.
	New func(t *testing.T) store.Store
	// Reopen opens another store on the database behind s (a restart, or a second
	// replica), closed by t.Cleanup.
	Reopen func(t *testing.T, s store.Store) store.Store
	// Settle, when set, waits until ListEvents can show every event appended to s
	// so far. A driver that shows an event only once every transaction older than
	// its own has ended (PostgreSQL) needs it: a test's own writes have committed,
	// but another test's transaction may still be open.
	Settle func(t *testing.T, s store.Store)
}

// Run runs the whole suite as parallel subtests, each on its own store.
func Run(t *testing.T, d Driver) {
	tests := []struct {
		name string
		fn   func(t *testing.T, d Driver)
	}{
		{"InstallationID", testInstallationID},
		{"InstallationIDConcurrent", testInstallationIDConcurrent},
		{"PoolRoundTrip", testPoolRoundTrip},
		{"PoolErrors", testPoolErrors},
		{"PoolUpdate", testPoolUpdate},
		{"PoolDelete", testPoolDelete},
		{"SandboxRoundTrip", testSandboxRoundTrip},
		{"SandboxCreate", testSandboxCreate},
		{"SandboxAdmittedAsRead", testSandboxAdmittedAsRead},
		{"SandboxIdempotencyKey", testSandboxIdempotencyKey},
		{"SandboxIdempotencyKeyConcurrent", testSandboxIdempotencyKeyConcurrent},
		{"SandboxRequestHash", testSandboxRequestHash},
		{"SandboxUpdate", testSandboxUpdate},
		{"SandboxUpdateAbort", testSandboxUpdateAbort},
		{"SandboxUpdatePanic", testSandboxUpdatePanic},
		{"SandboxReasonFromABackend", testSandboxReasonFromABackend},
		{"SandboxUpdateConcurrent", testSandboxUpdateConcurrent},
		{"SandboxUpdateBatch", testSandboxUpdateBatch},
		{"SandboxUpdateBatchConcurrent", testSandboxUpdateBatchConcurrent},
		{"KnownUpdate", testKnownUpdate},
		{"KnownUpdateConcurrent", testKnownUpdateConcurrent},
		{"Watch", testWatch},
		{"EventsAppended", testEventsAppended},
		{"EventsNotAppended", testEventsNotAppended},
		{"EventsList", testEventsList},
		{"EventsFollowEmpty", testEventsFollowEmpty},
		{"EventsPrune", testEventsPrune},
		{"SandboxListFilters", testSandboxListFilters},
		{"SandboxListPaging", testSandboxListPaging},
		{"SandboxClaim", testSandboxClaim},
		{"SandboxClaimConcurrent", testSandboxClaimConcurrent},
		{"SandboxCount", testSandboxCount},
		{"SandboxListExpiresBy", testSandboxListExpiresBy},
		{"ProjectRoundTrip", testProjectRoundTrip},
		{"ProjectUsageAndDelete", testProjectUsageAndDelete},
		{"ProjectUsageSaturates", testProjectUsageSaturates},
		{"ProjectDeleteRevokesTokens", testProjectDeleteRevokesTokens},
		{"SandboxAdmission", testSandboxAdmission},
		{"SandboxAdmissionConcurrent", testSandboxAdmissionConcurrent},
		{"SandboxAdmissionRetriesUnderQuota", testSandboxAdmissionRetriesUnderQuota},
		{"SandboxAdmissionDecidesOnce", testSandboxAdmissionDecidesOnce},
		{"WarmClaim", testWarmClaim},
		{"WarmClaimConcurrent", testWarmClaimConcurrent},
		{"WarmClaimQuota", testWarmClaimQuota},
		{"WarmStats", testWarmStats},
		{"Profiles", testProfiles},
		{"Snapshots", testSnapshots},
		{"Tokens", testTokens},
		{"Policy", testPolicy},
		{"ReconcilePassRoundTrip", testReconcilePassRoundTrip},
		{"ReconcilePassPagingAndRetention", testReconcilePassPagingAndRetention},
		{"Lease", testLease},
		{"LeaseConcurrent", testLeaseConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, d)
		})
	}
}

// t0 has nanoseconds on purpose: the store keeps microseconds.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	return t.Context()
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// wantCode fails unless err is an *api.Error with code.
func wantCode(t *testing.T, err error, code api.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	if api.AsError(err) == nil || api.CodeOf(err) != code {
		t.Fatalf("got error %v (%T), want an *api.Error with code %s", err, err, code)
	}
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, show(got), show(want))
	}
}

// show prints a value with pointers followed, so that times are readable in failures.
func show(v any) string {
	switch x := v.(type) {
	case store.Sandbox:
		return fmt.Sprintf("%+v expiresAt=%v claimExpiresAt=%v", x, deref(x.ExpiresAt), deref(x.ClaimExpiresAt))
	case store.Token:
		return fmt.Sprintf("%+v lastUsedAt=%v", x, deref(x.LastUsedAt))
	}
	return fmt.Sprintf("%+v", v)
}

func deref(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}

func ptr[T any](v T) *T { return &v }

// ts is what the store makes of a time.
func ts(t time.Time) time.Time { return store.Timestamp(t) }
