package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// A create naming only a pool that does not exist is refused at once, saying which
// name is unknown and what it may have meant, rather than that every pool is "not in
// allowedPools". One that names a real pool beside an unknown one is accepted.
func TestCreateWithAMisspelledPool(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		body := map[string]any{"placement": map[string]any{"allowedPools": []string{"devhots"}}}
		got := e.do(e.admin, "POST", "/v1/sandboxes", body).want(t, http.StatusBadRequest, api.CodeInvalidRequest).apiError(t)
		if !strings.Contains(got.Message, `"devhots"`) || !strings.Contains(got.Message, `did you mean "devhost"?`) ||
			strings.Contains(got.Message, "not in allowedPools") {
			t.Fatalf("message: %q", got.Message)
		}
		body = map[string]any{"placement": map[string]any{"allowedPools": []string{"devhots", "fake"}}}
		e.do(e.admin, "POST", "/v1/sandboxes", body).want(t, http.StatusAccepted)
	})
}
