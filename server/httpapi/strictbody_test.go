package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// A JSON body is taken as the API document writes it: keys name their fields
// exactly (case included), and the body is UTF-8; anything else is 400
// invalid_request and changes nothing.
func TestStrictJSONBodies(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		for _, c := range []struct{ method, path, body, want string }{
			{"POST", "/v1/sandboxes", `{"Template":"base"}`, `"Template"`},
			{"POST", "/v1/sandboxes", `{"placement":{"AllowedPools":["fake"]}}`, `"placement.AllowedPools"`},
			{"POST", "/v1/sandboxes", "{\"template\":\"b\xffase\"}", "UTF-8"},
			{"POST", "/v1/admin/tokens", `{"Scope":"admin"}`, `"Scope"`},
			{"POST", "/v1/admin/tokens", "{\"scope\":\"admin\",\"name\":\"\xc3\"}", "UTF-8"},
			// Escaped, but still not text: json would make it U+FFFD.
			{"POST", "/v1/sandboxes", `{"template":"a\ud800b"}`, "surrogate"},
			{"POST", "/v1/admin/tokens", `{"scope":"admin","name":"\udc00"}`, "surrogate"},
		} {
			r := e.request(e.admin, c.method, c.path, strings.NewReader(c.body), nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
			if msg := r.apiError(t).Message; !strings.Contains(msg, c.want) {
				t.Errorf("%s %s %q: %q does not name %s", c.method, c.path, c.body, msg, c.want)
			}
		}
		var list struct{ Items []any }
		e.do(e.admin, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 0 {
			t.Fatalf("refused bodies created %d sandboxes", len(list.Items))
		}
		// Exec's body too, though none of it is stored.
		sb := e.running(e.admin, "fake")
		e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec", `{"Command":"true"}`).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec", "{\"command\":\"echo \xff\"}").want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec", `{"command":"echo \ud800"}`).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec", `{"command":"true"}`).want(t, http.StatusOK)
	})
}
