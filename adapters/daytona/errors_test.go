package daytona

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/daytona/daytonafake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

// Every provider status maps to the contract's code, and no message carries the key,
// even when Daytona's own message quotes it.
func TestStatusMapping(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   api.Code
	}{
		{http.StatusUnauthorized, api.CodeProviderUnavailable},
		{http.StatusForbidden, api.CodeProviderUnavailable},
		{http.StatusNotFound, api.CodeNotFound},
		{http.StatusConflict, api.CodeInvalidState},
		{http.StatusTooManyRequests, api.CodeInsufficientCapacity},
		{http.StatusInternalServerError, api.CodeProviderUnavailable},
		{http.StatusServiceUnavailable, api.CodeProviderUnavailable},
	} {
		a, fake := setup(t, ClassContainer)
		fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
			daytonafake.WriteError(w, tc.status, "rejected request with key "+testKey)
			return true
		})
		_, err := a.Get(t.Context(), "dtn000001")
		if !api.IsCode(err, tc.want) {
			t.Errorf("HTTP %d: got %v, want %s", tc.status, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), testKey) {
			t.Errorf("HTTP %d: message %q contains the key", tc.status, err)
		}
	}
}

// 429 on create means no room now: insufficient_capacity, which the scheduler
// retries without counting the attempt.
func TestCreateRateLimited(t *testing.T) {
	a, fake := setup(t, ClassContainer)
	fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && r.URL.Path == "/sandbox" {
			daytonafake.WriteError(w, http.StatusTooManyRequests, "sandbox quota exceeded")
			return true
		}
		return false
	})
	if _, err := a.Create(t.Context(), request(ids.New("inst"))); !api.IsCode(err, api.CodeInsufficientCapacity) {
		t.Fatalf("got %v, want insufficient_capacity", err)
	}
}

func TestWrongKey(t *testing.T) {
	fake := daytonafake.New(testKey, t.TempDir())
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	const wrong = "dtn_wrong_key_77aa"
	a, err := New(Config{APIURL: srv.URL}, wrong, WithPollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Health(t.Context())
	if !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), "credentials were rejected") {
		t.Fatalf("health with a wrong key: %v", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Fatalf("message %q contains the key", err)
	}
}

// A backend that never answers is cut off by the caller's deadline.
func TestTimeout(t *testing.T) {
	a, fake := setup(t, ClassContainer)
	fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		<-r.Context().Done()
		return true
	})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := a.Health(ctx)
	if !api.IsCode(err, api.CodeProviderUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want provider_unavailable wrapping the deadline", err)
	}
}

// Create's wait for the sandbox to start ends with the caller's context.
func TestCreateWaitBoundedByContext(t *testing.T) {
	a, _ := setup(t, ClassContainer, func(f *daytonafake.Server) { f.Settle = 1 << 30 }) // never starts
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := a.Create(ctx, request(ids.New("inst")))
	if !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), "creating") {
		t.Fatalf("got %v, want provider_unavailable saying the sandbox is still creating", err)
	}
}

func TestDeleteMissingAndGetDeleted(t *testing.T) {
	a, _ := setup(t, ClassContainer)
	if err := a.Delete(t.Context(), "dtn999999"); err != nil {
		t.Fatalf("delete of a missing sandbox: %v", err)
	}
	if _, err := a.Get(t.Context(), "dtn999999"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("get of a missing sandbox: %v", err)
	}
}
