package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// A pool of the daemon's config file is the file's: every change and delete through
// the API is 409 invalid_state saying where to go, nothing of the pool is touched
// (a forced delete terminates none of its sandboxes), and creating a pool of its
// name says the same. The pool's answers show where it is defined.
func TestConfigFilePoolsAreRefused(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		e := newEnv(t, st)
		if _, err := st.CreatePool(ctx, e.clk.Now(), store.Pool{Name: "filed", Adapter: "fake",
			Trust: api.TrustPrivate, Source: store.PoolFromConfig}); err != nil {
			t.Fatal(err)
		}
		if err := e.pools.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		sb := e.running(e.admin, "filed")
		before, err := st.GetPool(ctx, "filed")
		if err != nil {
			t.Fatal(err)
		}

		var p httpapi.Pool
		e.do(e.admin, "GET", "/v1/admin/pools/filed", nil).want(t, http.StatusOK).decode(t, &p)
		if p.Source == nil || *p.Source != httpapi.PoolOriginConfig {
			t.Fatalf("source of a config file's pool: %v", p.Source)
		}
		var list httpapi.PoolList
		e.do(e.admin, "GET", "/v1/admin/pools", nil).want(t, http.StatusOK).decode(t, &list)
		for _, item := range list.Items {
			want := httpapi.PoolOriginAPI
			if item.Name == "filed" {
				want = httpapi.PoolOriginConfig
			}
			if item.Source == nil || *item.Source != want {
				t.Errorf("listed pool %s: source %v, want %s", item.Name, item.Source, want)
			}
		}

		for _, tc := range []struct {
			name, method, path string
			body               any
		}{
			{"patch", "PATCH", "/v1/admin/pools/filed", map[string]any{"maxConcurrency": 3}},
			{"put", "PUT", "/v1/admin/pools/filed", map[string]any{"name": "filed", "adapter": "fake", "region": "eu"}},
			{"delete", "DELETE", "/v1/admin/pools/filed", nil},
			{"forced delete", "DELETE", "/v1/admin/pools/filed?force=true", nil},
			{"create", "POST", "/v1/admin/pools", map[string]any{"name": "filed", "adapter": "fake"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.t = t
				got := e.do(e.admin, tc.method, tc.path, tc.body).want(t, http.StatusConflict, api.CodeInvalidState).apiError(t)
				if !strings.Contains(got.Message, "config file") || got.Details["source"] != "config" {
					t.Errorf("answer does not say the pool is the config file's: %+v", got)
				}
			})
		}
		e.t = t
		after, err := st.GetPool(ctx, "filed")
		if err != nil || after.Version != before.Version {
			t.Fatalf("pool written by a refused request: version %d, then %d (%v)", before.Version, after.Version, err)
		}
		if cur, _ := st.GetSandbox(ctx, sb.ID); cur.State != store.StateRunning {
			t.Fatalf("a refused forced delete left the pool's sandbox %s", cur.State)
		}

		// Taken by an API pool, a name answers as it always did.
		if got := e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "fake", "adapter": "fake"}).
			want(t, http.StatusConflict, api.CodeInvalidState).apiError(t); strings.Contains(got.Message, "config file") {
			t.Errorf("an API pool's name answered as the config file's: %s", got.Message)
		}
		// Where a pool is defined is not the client's to say.
		e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "mine", "adapter": "fake", "source": "config"}).
			want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "PATCH", "/v1/admin/pools/fake", map[string]any{"source": "config"}).
			want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "mine", "adapter": "fake"}).
			want(t, http.StatusCreated).decode(t, &p)
		if *p.Source != httpapi.PoolOriginAPI {
			t.Fatalf("created pool: source %s", *p.Source)
		}

		// Released by a start whose file no longer names it, the pool is the API's.
		after.Source = store.PoolFromAPI
		if _, err := st.UpdatePool(ctx, e.clk.Now(), after); err != nil {
			t.Fatal(err)
		}
		e.do(e.admin, "PATCH", "/v1/admin/pools/filed", map[string]any{"maxConcurrency": 3}).want(t, http.StatusOK).decode(t, &p)
		if *p.Source != httpapi.PoolOriginAPI || p.MaxConcurrency != 3 {
			t.Fatalf("released pool after a patch: %+v", p)
		}
	})
}
