package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
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
		// A pair that does not parse does not hide the others.
		{false, "GET", "/v1/sandboxes?pool=%00&x;y", nil},
		{false, "GET", "/v1/sandboxes?pool=%00&z=%zz", nil},
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
		// A file name may be any bytes but NUL.
		r := e.do(tok, "GET", "/v1/sandboxes/"+sb.ID+"/files/content?path=caf%e9", nil)
		if strings.Contains(string(r.body), "invalid UTF-8") {
			t.Errorf("a file name that is not UTF-8 was refused as text: %d %s", r.status, r.body)
		}
		e.do(tok, "GET", "/v1/sandboxes/"+sb.ID+"/files/content?path=a%00b", nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
	})
}

// The refusal names where the NUL is, at any depth.
func TestNulFieldNamesThePath(t *testing.T) {
	type inner struct {
		Regions []string `json:"regions"`
	}
	type body struct {
		Name      string            `json:"name"`
		Placement *inner            `json:"placement,omitempty"`
		Env       map[string]string `json:"env"`
		Defaults  map[string]any    `json:"defaults"`
	}
	for want, v := range map[string]body{
		"":                     {Name: "ok", Placement: &inner{Regions: []string{"eu"}}},
		"name":                 {Name: "a\x00"},
		"placement.regions[1]": {Placement: &inner{Regions: []string{"eu", "\x00"}}},
		"env.A":                {Env: map[string]string{"A": "\x00"}},
		"env (a key)":          {Env: map[string]string{"\x00": "v"}},
		"defaults.x[0].y":      {Defaults: map[string]any{"x": []any{map[string]any{"y": "\x00"}}}},
	} {
		if got := httpapi.NulField(v); got != want {
			t.Errorf("NulField = %q, want %q", got, want)
		}
	}
}
