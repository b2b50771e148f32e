package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
)

// POST /v1/admin/reconcile never runs beside another replica's pass: it answers 409
// invalid_state with Retry-After instead, and runs once that pass is over.
func TestReconcileWaitsForAnotherReplicasPass(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) {
			o.Reconciler = reconcile.New(o.Store, o.Pools, o.Clock, reconcile.Options{Installation: o.Installation, ReplicaID: "here"})
		})
		ctx := t.Context()
		// Another replica, leader or not, is in a pass.
		if won, err := st.TryLease(ctx, reconcile.PassLeaseName, "elsewhere", e.clk.Now(), time.Minute); err != nil || !won {
			t.Fatalf("TryLease: %v %v", won, err)
		}
		r := e.do(e.admin, "POST", "/v1/admin/reconcile", nil).want(t, http.StatusConflict, api.CodeInvalidState)
		if got, want := r.header.Get("Retry-After"), strconv.Itoa(int(reconcile.PassRetryAfter/time.Second)); got != want {
			t.Fatalf("Retry-After %q, want %q", got, want)
		}
		if err := st.ReleaseLease(ctx, reconcile.PassLeaseName, "elsewhere"); err != nil {
			t.Fatal(err)
		}
		var rep httpapi.ReconcileReport
		e.do(e.admin, "POST", "/v1/admin/reconcile", nil).want(t, http.StatusOK).decode(t, &rep)
		if len(rep.Pools) != 3 {
			t.Fatalf("report %+v", rep)
		}
		// The pass gave the pass lease up when it ended.
		if won, err := st.TryLease(ctx, reconcile.PassLeaseName, "elsewhere", e.clk.Now(), time.Minute); err != nil || !won {
			t.Fatalf("the pass lease was kept after the pass: %v %v", won, err)
		}
	})
}
