package daytona

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/internal/ids"
)

// TestDaytonaWordsNeverQuoteTheKey: Daytona's errorReason reaches errors and instance
// messages without the key, should Daytona quote a request in it.
func TestDaytonaWordsNeverQuoteTheKey(t *testing.T) {
	a, fake := setup(t, ClassContainer)
	ctx := t.Context()
	fake.FailCreates("runner refused Authorization: Bearer " + testKey)
	_, err := a.Create(ctx, request(ids.New("inst")))
	if err == nil || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), adapters.Redacted) {
		t.Fatalf("failed create: %v", err)
	}

	fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/sandbox") {
			return false
		}
		sb := map[string]any{"id": "sb1", "name": "sbx_1", "state": "error", "labels": map[string]string{},
			"errorReason": "quota exceeded for " + r.Header.Get("Authorization")}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/sandbox" {
			_ = json.NewEncoder(w).Encode(map[string]any{"items": []any{sb}})
			return true
		}
		_ = json.NewEncoder(w).Encode(sb)
		return true
	})
	got, err := a.Get(ctx, "sb1")
	if err != nil || got.State != adapters.StateError || strings.Contains(got.Message, testKey) || got.Message == "" {
		t.Fatalf("Get: %+v, %v", got, err)
	}
}
