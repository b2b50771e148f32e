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

// GET /v1/admin/reconcile/passes lists every recorded pass, newest first and a page
// at a time: the leader's periodic ones and those asked for, with the asking token.
// It is for admins only, and a bad cursor or limit is invalid_request.
func TestReconcilePassesListed(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		var rec *reconcile.Reconciler
		e := newEnvWith(t, st, func(o *httpapi.Options) {
			rec = reconcile.New(o.Store, o.Pools, o.Clock, reconcile.Options{Installation: o.Installation, ReplicaID: "here"})
			o.Reconciler = rec
		})
		ctx := t.Context()
		toks, err := st.ListTokens(ctx)
		if err != nil || len(toks) != 1 {
			t.Fatalf("tokens %v %v", toks, err)
		}
		adminID := toks[0].ID
		if _, led, err := rec.RunOnce(ctx); !led || err != nil {
			t.Fatalf("RunOnce: %v %v", led, err)
		}
		e.clk.Advance(time.Minute)
		e.do(e.admin, "POST", "/v1/admin/reconcile", nil).want(t, http.StatusOK)
		e.clk.Advance(time.Minute)
		e.do(e.admin, "POST", "/v1/admin/reconcile", nil).want(t, http.StatusOK)

		var page httpapi.ReconcilePassList
		e.do(e.admin, "GET", "/v1/admin/reconcile/passes?limit=2", nil).want(t, http.StatusOK).decode(t, &page)
		if len(page.Items) != 2 || page.NextCursor == nil {
			t.Fatalf("first page %+v", page)
		}
		for i, p := range page.Items {
			if p.Trigger != "on_demand" || p.TokenId == nil || *p.TokenId != adminID || p.Replica != "here" || len(p.Pools) != 3 {
				t.Errorf("on-demand pass %d: %+v", i, p)
			}
		}
		if !page.Items[0].StartedAt.After(page.Items[1].StartedAt) || page.Items[0].Id <= page.Items[1].Id {
			t.Errorf("not newest first: %+v", page.Items)
		}
		var rest httpapi.ReconcilePassList
		e.do(e.admin, "GET", "/v1/admin/reconcile/passes?limit=2&cursor="+*page.NextCursor, nil).want(t, http.StatusOK).decode(t, &rest)
		if len(rest.Items) != 1 || rest.NextCursor != nil {
			t.Fatalf("second page %+v", rest)
		}
		if p := rest.Items[0]; p.Trigger != "periodic" || p.TokenId != nil || !p.StartedAt.Equal(page.Items[1].StartedAt.Add(-time.Minute)) {
			t.Errorf("periodic pass %+v", p)
		}

		e.do(e.projectToken("default", "p"), "GET", "/v1/admin/reconcile/passes", nil).want(t, http.StatusForbidden)
		for _, q := range []string{"cursor=nope", "limit=0", "limit=5000", "limit=x"} {
			e.do(e.admin, "GET", "/v1/admin/reconcile/passes?"+q, nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
	})
}
