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

// With the operator's allowlist set, a create or update naming another credentials
// variable is 400 invalid_request naming the variable, and writes nothing; so is any
// update of a pool stored before the list was tightened, until its variable is fixed.
func TestCredentialsAllowlist(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		allowed, err := api.NewEnvAllowlist([]string{"DAYTONA_*"})
		if err != nil {
			t.Fatal(err)
		}
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.AllowedCredentialsEnv = allowed })
		creds := func(env string) map[string]any { return map[string]any{"env": env} }
		e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "ok", "adapter": "fake", "credentials": creds("DAYTONA_EU_KEY")}).
			want(t, http.StatusCreated)
		// Stored before the list was tightened.
		if _, err := st.CreatePool(ctx, e.clk.Now(), store.Pool{Name: "old", Adapter: "fake", Trust: api.TrustPrivate,
			CredentialsEnv: "AWS_SECRET_ACCESS_KEY"}); err != nil {
			t.Fatal(err)
		}

		for _, tc := range []struct {
			name, method, path string
			body               map[string]any
		}{
			{"create", "POST", "/v1/admin/pools", map[string]any{"name": "new", "adapter": "fake", "credentials": creds("AWS_SECRET_ACCESS_KEY")}},
			{"put", "PUT", "/v1/admin/pools/ok", map[string]any{"name": "ok", "adapter": "fake", "credentials": creds("AWS_SECRET_ACCESS_KEY")}},
			{"patch", "PATCH", "/v1/admin/pools/ok", map[string]any{"credentials": creds("AWS_SECRET_ACCESS_KEY")}},
			{"patch of a pool off the list", "PATCH", "/v1/admin/pools/old", map[string]any{"maxConcurrency": 2}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.t = t
				got := e.do(e.admin, tc.method, tc.path, tc.body).want(t, http.StatusBadRequest, api.CodeInvalidRequest).apiError(t)
				if !strings.Contains(got.Message, `"AWS_SECRET_ACCESS_KEY"`) || !strings.Contains(got.Message, "poolCredentials.allowedEnv") ||
					got.Details["env"] != "AWS_SECRET_ACCESS_KEY" {
					t.Errorf("answer does not name the refused variable and the setting: %+v", got)
				}
			})
		}
		e.t = t
		if _, err := st.GetPool(ctx, "new"); !api.IsCode(err, api.CodeNotFound) {
			t.Errorf("refused create stored a pool: %v", err)
		}
		for name, want := range map[string]string{"ok": "DAYTONA_EU_KEY", "old": "AWS_SECRET_ACCESS_KEY"} {
			if p, err := st.GetPool(ctx, name); err != nil || p.Version != 1 || p.CredentialsEnv != want {
				t.Errorf("pool %s after refused updates: %+v, %v", name, p, err)
			}
		}
		// Fixed, the old pool is the API's to change again.
		e.do(e.admin, "PATCH", "/v1/admin/pools/old", map[string]any{"credentials": creds("DAYTONA_OLD_KEY")}).want(t, http.StatusOK)
		e.do(e.admin, "PATCH", "/v1/admin/pools/old", map[string]any{"credentials": map[string]any{}}).want(t, http.StatusOK)
	})
}
