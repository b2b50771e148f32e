package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// A NUL character or invalid UTF-8 anywhere a request's text may be stored or
// looked up is refused with 400 invalid_request on both stores. PostgreSQL's text
// cannot hold either: before this check they reached it and came back as 500s,
// while SQLite stored or matched them.
func TestUnstorableTextIsRefused(t *testing.T) {
	cases := []struct {
		admin        bool
		method, path string
		body         any
	}{
		{false, "GET", "/v1/sandboxes/%00", nil},
		{false, "GET", "/v1/sandboxes/%ff", nil},
		{false, "DELETE", "/v1/sandboxes/%00", nil},
		{false, "GET", "/v1/sandboxes/%00/wait?state=running", nil},
		{false, "GET", "/v1/snapshots/%00", nil},
		{false, "GET", "/v1/sandboxes?pool=%00", nil},
		{false, "GET", "/v1/sandboxes?pool=%ff", nil},
		{false, "GET", "/v1/sandboxes?label=a=%00", nil},
		{false, "GET", "/v1/sandboxes?label=%00=a", nil},
		{false, "POST", "/v1/sandboxes", `{"template":"a\u0000b","placement":{"allowedPools":["fake"]}}`},
		{false, "POST", "/v1/sandboxes", `{"fromSnapshot":"a\u0000b"}`},
		{false, "POST", "/v1/sandboxes", `{"profile":"a\u0000b"}`},
		{false, "POST", "/v1/sandboxes", `{"placement":{"allowedPools":["fake"],"regions":["\u0000"]}}`},
		{false, "POST", "/v1/sandboxes", `{"placement":{"allowedPools":["fake"]},"env":{"A":"\u0000"}}`},
		{true, "GET", "/v1/admin/pools/%00", nil},
		{true, "PUT", "/v1/admin/profiles/a%00", `{}`},
		{true, "POST", "/v1/admin/tokens", `{"scope":"admin","name":"a\u0000"}`},
		{true, "GET", "/v1/admin/projects/a%00/b", nil},
		{true, "PUT", "/v1/admin/policy", `{"defaults":{"x":"\u0000"}}`},
		{true, "POST", "/v1/admin/pools", `{"name":"p","adapter":"fake","config":{"k\u0000":1}}`},
	}
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		tok := e.projectToken("acme", "mine")
		for _, c := range cases {
			secret := tok
			if c.admin {
				secret = e.admin
			}
			r := e.do(secret, c.method, c.path, c.body)
			if r.status != http.StatusBadRequest || r.apiError(t).Code != api.CodeInvalidRequest {
				t.Errorf("%s %s %v: %d %s, want 400 invalid_request", c.method, c.path, c.body, r.status, r.body)
			}
		}
		// Exec's stdin is data, not stored text: NUL bytes in it are fine.
		sb := e.running(tok, "fake")
		e.do(tok, "POST", "/v1/sandboxes/"+sb.ID+"/exec", `{"command":"cat","stdin":"a\u0000b"}`).want(t, http.StatusOK)
	})
}
