package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// Every documented operation is served and every served route is documented, so the
// OpenAPI document (and the client generated from it) cannot drift from the server.
func TestRoutesMatchDocument(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		h, err := httpapi.New(httpapi.Options{Store: e.st, Pools: e.pools, Changes: feed(t, e.st)})
		if err != nil {
			t.Fatal(err)
		}
		routes, ok := h.(chi.Routes)
		if !ok {
			t.Fatalf("New returned %T, not a chi router", h)
		}
		var served []string
		err = chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			served = append(served, method+" "+route)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		doc, err := httpapi.GetSwagger()
		if err != nil {
			t.Fatal(err)
		}
		var documented []string
		for path, item := range doc.Paths.Map() {
			for method := range item.Operations() {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
		slices.Sort(served)
		slices.Sort(documented)
		for _, d := range documented {
			if !slices.Contains(served, d) {
				t.Errorf("documented but not served: %s", d)
			}
		}
		for _, s := range served {
			if !slices.Contains(documented, s) {
				t.Errorf("served but not documented: %s", s)
			}
		}
		if len(documented) < 30 {
			t.Fatalf("only %d documented operations: %v", len(documented), documented)
		}
	})
}
