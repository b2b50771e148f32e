package daytona

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
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

// No room now is insufficient_capacity, which the scheduler retries without counting
// the attempt or touching the pool's health, whichever way Daytona says it: a 429, a
// 400 "No available runners", or an organisation over its quota (a 403 on current
// releases, a 400 on some older ones). Any other 400 or 403 keeps its own code.
func TestCreateWithoutRoom(t *testing.T) {
	for _, tc := range []struct {
		status int
		msg    string
		want   api.Code
	}{
		{http.StatusTooManyRequests, "ThrottlerException: Too Many Requests", api.CodeInsufficientCapacity},
		{http.StatusBadRequest, "No available runners", api.CodeInsufficientCapacity},
		{http.StatusForbidden, "Total memory limit exceeded. Maximum allowed: 10GiB.", api.CodeInsufficientCapacity},
		{http.StatusBadRequest, "Total disk limit exceeded. Maximum allowed: 30GiB.", api.CodeInsufficientCapacity},
		{http.StatusBadRequest, "Invalid snapshot name", api.CodeInvalidRequest},
		// One sandbox bigger than the organisation allows any: no retry can fit it.
		{http.StatusForbidden, "CPU request 8 exceeds maximum allowed per sandbox (4)", api.CodeInvalidRequest},
		{http.StatusForbidden, "Forbidden resource", api.CodeProviderUnavailable},
	} {
		a, fake := setup(t, ClassContainer)
		fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodPost && r.URL.Path == "/sandbox" {
				daytonafake.WriteError(w, tc.status, tc.msg)
				return true
			}
			return false
		})
		if _, err := a.Create(t.Context(), request(ids.New("inst"))); !api.IsCode(err, tc.want) {
			t.Errorf("%d %q: got %v, want %s", tc.status, tc.msg, err, tc.want)
		}
	}
}

// An organisation at its quota: the create over it is insufficient_capacity, with
// Daytona's words, and once a sandbox is deleted the next one fits.
func TestCreateOverQuota(t *testing.T) {
	a, _ := setup(t, ClassContainer, func(f *daytonafake.Server) { f.CPUQuota = 1 })
	inst := ids.New("inst")
	first, err := a.Create(t.Context(), request(inst))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Create(t.Context(), request(inst))
	if !api.IsCode(err, api.CodeInsufficientCapacity) || !strings.Contains(err.Error(), "Total CPU limit exceeded") {
		t.Fatalf("create over the quota: %v, want insufficient_capacity quoting Daytona", err)
	}
	if err := a.Delete(t.Context(), first.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(t.Context(), request(inst)); err != nil {
		t.Fatalf("create once the quota has room: %v", err)
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

// Create's wait for the sandbox to start ends with the caller's context. A deadline
// passed while Daytona answers "creating" is this sandbox's failure (sandbox_failed,
// the pool stays healthy); a cancellation (a shutdown) says nothing about the
// sandbox and stays provider_unavailable.
func TestCreateWaitBoundedByContext(t *testing.T) {
	// The polls of the sandbox are held until the caller gives up, so the deadline
	// passes in the wait whatever the machine's speed.
	holdPolls := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/sandbox/") {
			<-r.Context().Done()
			return true
		}
		return false
	}
	a, fake := setup(t, ClassContainer, func(f *daytonafake.Server) { f.Settle = 1 << 30 }) // never starts
	fake.SetIntercept(holdPolls)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := a.Create(ctx, request(ids.New("inst")))
	if !api.IsCode(err, api.CodeSandboxFailed) || !strings.Contains(err.Error(), "when the wait ended") {
		t.Fatalf("got %v, want sandbox_failed saying the wait ended", err)
	}

	a, fake = setup(t, ClassContainer, func(f *daytonafake.Server) { f.Settle = 1 << 30 })
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	reads := 0
	fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/sandbox/") {
			if reads++; reads == 3 {
				cancel()
			}
		}
		return false
	})
	_, err = a.Create(ctx, request(ids.New("inst")))
	if !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("cancelled wait: %v, want provider_unavailable saying it was cancelled", err)
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

// A snapshot whose request or wait fails is removed: its name was never returned, so
// nothing else would ever delete it, and Daytona keeps (and bills) it.
func TestFailedSnapshotIsRemoved(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fault answers a request itself, or returns false to let the fake answer.
		fault func(w http.ResponseWriter, r *http.Request, fake *daytonafake.Server, cancel func()) bool
	}{
		{"answer lost", func(w http.ResponseWriter, r *http.Request, fake *daytonafake.Server, _ func()) bool {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/snapshot") {
				return false
			}
			fake.SetIntercept(nil)
			fake.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusBadGateway)
			return true
		}},
		{"wait cancelled", func(w http.ResponseWriter, r *http.Request, _ *daytonafake.Server, cancel func()) bool {
			if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/snapshots/") {
				cancel()
			}
			return false
		}},
		// Daytona registers the snapshot only after the caller has given up: the
		// clean-up looks for it until it appears.
		{"registered late", func() func(http.ResponseWriter, *http.Request, *daytonafake.Server, func()) bool {
			hidden := 0
			return func(w http.ResponseWriter, r *http.Request, fake *daytonafake.Server, cancel func()) bool {
				if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/snapshots/") || hidden == 3 {
					return false
				}
				if hidden++; hidden == 2 {
					cancel()
				}
				daytonafake.WriteError(w, http.StatusNotFound, "snapshot not found")
				return true
			}
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, fake := setup(t, ClassContainer)
			inst, err := a.Create(t.Context(), request(ids.New("inst")))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool { return tc.fault(w, r, fake, cancel) })
			if _, err := a.Snapshot(ctx, inst.Ref, adapters.SnapshotDisk); err == nil {
				t.Fatal("the snapshot succeeded")
			}
			fake.SetIntercept(nil)
			if left := fake.Snapshots(); len(left) != 0 {
				t.Fatalf("snapshots left behind: %v", left)
			}
		})
	}
}
