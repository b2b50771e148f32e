package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// TestAnswersAreDocumented: every status an operation answers in a sweep of the
// situations a caller commonly meets (its object running, stopped, terminated or
// missing, and no token at all) is one the document lists for that operation, and
// every /v1 operation has a default error response. A client generated from the
// document gets a typed error body only for the statuses it lists.
func TestAnswersAreDocumented(t *testing.T) {
	doc, err := httpapi.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]int{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := strings.ToUpper(method) + " " + path
			if !strings.HasPrefix(path, "/v1/") {
				continue
			}
			if op.Responses.Default() == nil {
				t.Errorf("%s has no default error response", key)
			}
			for code := range op.Responses.Map() {
				if n, err := strconv.Atoi(code); err == nil {
					documented[key] = append(documented[key], n)
				}
			}
		}
	}
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		seen := map[string]map[int]string{} // operation, status, situation
		record := func(o docOp, situation string, r response) {
			key := o.method + " " + o.path
			if seen[key] == nil {
				seen[key] = map[int]string{}
			}
			if _, ok := seen[key][r.status]; !ok {
				seen[key][r.status] = fmt.Sprintf("%s: %s", situation, strings.TrimSpace(string(r.body)))
			}
		}
		for i, o := range documentedOps(t) {
			kind := tenantRoute(t, o)
			if kind == "public" {
				continue
			}
			// Fresh objects for each operation: the one before may have deleted them.
			target, missing, pool, token := "", "", fmt.Sprintf("sweep%d", i), ""
			switch kind {
			case "sandbox", "snapshot":
				sb := e.running(e.admin, "fake")
				target, missing = sb.ID, ids.New("sbx")
				if kind == "snapshot" {
					var snap httpapi.Snapshot
					e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/snapshots", map[string]any{}).want(t, http.StatusCreated).decode(t, &snap)
					target, missing = snap.Id, ids.New("snap")
				}
			case "admin":
				e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": pool, "adapter": "fake"}).want(t, http.StatusCreated)
				e.do(e.admin, "PUT", "/v1/admin/profiles/ci", map[string]any{}).want(t, http.StatusOK)
				e.do(e.admin, "PUT", "/v1/admin/projects/acme/b", map[string]any{}).want(t, http.StatusOK)
				var tok httpapi.TokenCreated
				e.do(e.admin, "POST", "/v1/admin/tokens", map[string]any{"scope": "project", "project": "x"}).
					want(t, http.StatusCreated).decode(t, &tok)
				token = tok.Token.Id
			}
			fill := func(id string) string {
				return strings.NewReplacer("/pools/{name}", "/pools/"+pool, "/profiles/{name}", "/profiles/ci",
					"/tokens/{id}", "/tokens/"+token, "{org}", "acme", "{project}", "b", "{id}", id).Replace(o.path)
			}
			record(o, "no token", e.call("", o, fill(target)))
			if missing != "" {
				record(o, "missing", e.call(e.admin, o, fill(missing)))
			}
			record(o, "running", e.call(e.admin, o, fill(target)))
			// A wait for running on a stopped sandbox would wait out its timeout.
			if kind != "sandbox" || o.id == "waitSandbox" {
				continue
			}
			stopped := e.running(e.admin, "fake")
			e.do(e.admin, "POST", "/v1/sandboxes/"+stopped.ID+"/stop", nil).want(t, http.StatusOK)
			record(o, "stopped", e.call(e.admin, o, fill(stopped.ID)))
			gone := e.running(e.admin, "fake")
			e.do(e.admin, "DELETE", "/v1/sandboxes/"+gone.ID, nil)
			e.provision(gone.ID)
			record(o, "terminated", e.call(e.admin, o, fill(gone.ID)))
		}
		e.t = t
		for key, statuses := range seen {
			for status, example := range statuses {
				if status == http.StatusUnauthorized || slices.Contains(documented[key], status) {
					continue // 401 is the default response's, on every route
				}
				t.Errorf("%s answered %d, which the document does not list (%s)", key, status, example)
			}
		}
	})
}
