package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
)

// TestClaimWarmKeyTakenMeanwhile: a create with the claim's idempotency key that
// commits after the claim read the key, and before the claim writes, fails the
// claim as a conflict and leaves the warm sandbox as it was. The claim's DELETE and
// INSERT travel with its COMMIT, so this is the case in which the COMMIT must not
// remove the warm sandbox without putting the claim in its place.
func TestClaimWarmKeyTakenMeanwhile(t *testing.T) {
	for _, quota := range []store.Quota{{}, {Sandboxes: 10}} {
		t.Run(map[bool]string{false: "no quota", true: "with a quota"}[quota.Limited()], func(t *testing.T) {
			s := open(t, pgtest.SchemaURL(t))
			ctx := t.Context()
			t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			if quota.Limited() {
				if _, err := s.PutProject(ctx, t0, store.Project{Org: "org1", Name: "proj1", Quota: quota}); err != nil {
					t.Fatal(err)
				}
			}
			warm, _, err := s.CreateSandbox(ctx, t0, store.Sandbox{ID: "sbx_warm", Org: store.WarmOrg, Project: "alpha.k",
				State: store.StateRunning, Pool: "alpha", BackendRef: "ref-1", Resources: adapters.Resources{CPU: 1}})
			if err != nil {
				t.Fatal(err)
			}
			tenant := store.Sandbox{ID: "sbx_ignored", Org: "org1", Project: "proj1", Resources: adapters.Resources{CPU: 1},
				IdempotencyKey: "k"}
			_, _, err = s.ClaimWarm(ctx, t0, tenant, "alpha", "alpha.k", func(_ store.Admission, w store.Sandbox, ins *store.Sandbox) error {
				// Another replica's create with the same key, on its own connection.
				other := tenant
				other.ID, other.State, other.Pool = "sbx_other", store.StateQueued, ""
				if _, created, err := s.CreateSandbox(ctx, t0, other); err != nil || !created {
					t.Errorf("the concurrent create: created %v, %v", created, err)
				}
				ins.State, ins.Pool, ins.BackendRef = store.StateRunning, w.Pool, w.BackendRef
				return nil
			})
			if !api.IsCode(err, api.CodeInvalidState) || !strings.Contains(err.Error(), "Idempotency-Key") {
				t.Fatalf("claim: %v, want the conflict of a taken key", err)
			}
			got, err := s.GetSandbox(ctx, warm.ID)
			if err != nil || got.Org != store.WarmOrg || got.State != store.StateRunning {
				t.Fatalf("the warm sandbox after the failed claim: %+v, %v; want it untouched", got, err)
			}
		})
	}
}
