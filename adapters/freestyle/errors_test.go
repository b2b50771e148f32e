package freestyle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/freestyle"
	"github.com/different-ai/differently/api"
)

// answer makes an intercept that answers every request with status and a Freestyle
// error whose message quotes the key, as a careless provider might.
func answer(status int) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"code":"SOME_CODE","message":"refused key %s"}`, testKey)
		return true
	}
}

func TestStatusMapping(t *testing.T) {
	for status, code := range map[int]api.Code{
		http.StatusUnauthorized:        api.CodeProviderUnavailable,
		http.StatusForbidden:           api.CodeProviderUnavailable,
		http.StatusTooManyRequests:     api.CodeInsufficientCapacity,
		http.StatusInternalServerError: api.CodeProviderUnavailable,
		http.StatusBadGateway:          api.CodeProviderUnavailable,
	} {
		e := newEnv(t, freestyle.Config{})
		e.fake.SetIntercept(answer(status))
		_, err := e.a.Create(t.Context(), request("sbx_status"))
		if !api.IsCode(err, code) {
			t.Fatalf("HTTP %d: %v, want %s", status, err, code)
		}
		if err := e.a.Health(t.Context()); !api.IsCode(err, api.CodeProviderUnavailable) && status != http.StatusTooManyRequests {
			t.Fatalf("health on HTTP %d: %v", status, err)
		}
		if strings.Contains(err.Error(), testKey) {
			t.Fatalf("HTTP %d: the error %q contains the key", status, err)
		}
	}
}

func TestWrongKey(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	a, err := freestyle.New(freestyle.Config{APIURL: e.srv.URL}, "wrong-key-123", freestyle.WithHTTPClient(e.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Health(t.Context())
	if !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), "credentials were rejected") ||
		strings.Contains(err.Error(), "wrong-key-123") {
		t.Fatalf("health with a wrong key: %v", err)
	}
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	ctx := t.Context()
	if _, err := e.a.Get(ctx, "vm-missing"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, err := e.a.Get(ctx, "../v5/vms"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("get of a ref with a path in it: %v", err)
	}
	if err := e.a.Delete(ctx, "vm-missing"); err != nil {
		t.Fatalf("delete of a missing VM: %v", err)
	}
	if err := e.a.DeleteSnapshot(ctx, "sn-missing"); err != nil {
		t.Fatalf("delete of a missing snapshot: %v", err)
	}
	if _, err := e.a.ReadFile(ctx, "vm-missing", "/tmp/x"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("read on a missing VM: %v", err)
	}
	if _, err := e.a.Snapshot(ctx, "vm-missing", "memory"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("snapshot of a missing VM: %v", err)
	}
}

// TestTimeout: the provider never answers; the caller's deadline ends the call.
func TestTimeout(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	release := make(chan struct{})
	e.fake.SetIntercept(func(_ http.ResponseWriter, r *http.Request) bool {
		// The server notices the client leaving only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	})
	// Registered after newEnv's cleanup, so it runs first and the server can close.
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := e.a.Create(ctx, request("sbx_slow"))
	if !api.IsCode(err, api.CodeProviderUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("create against a hung provider: %v", err)
	}
}
