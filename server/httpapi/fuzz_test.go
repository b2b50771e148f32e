package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
	"github.com/different-ai/differently/server/tokens"
)

// fuzzAPI is the real router over a SQLite store and a fake pool, with one running
// sandbox to exec in. It is built once per fuzz target: newEnv wants a *testing.T.
type fuzzAPI struct {
	h       http.Handler
	secret  string
	running string
}

func newFuzzAPI(f *testing.F) *fuzzAPI {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "db.sqlite"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	clk := clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	pools := newTestPools(st, clk)
	if _, err := st.CreatePool(ctx, clk.Now(), store.Pool{Name: "fake", Adapter: "fake", Trust: api.TrustPrivate}); err != nil {
		f.Fatal(err)
	}
	if err := pools.Refresh(ctx); err != nil {
		f.Fatal(err)
	}
	inst, err := st.InstallationID(ctx)
	if err != nil {
		f.Fatal(err)
	}
	secret, err := tokens.New()
	if err != nil {
		f.Fatal(err)
	}
	tok := store.Token{ID: ids.New("tok"), Hash: tokens.Hash(secret), Scope: store.ScopeProject, Org: "org", Project: "proj"}
	if _, err := st.CreateToken(ctx, clk.Now(), tok); err != nil {
		f.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{
		Store: st, Pools: pools, Scheduler: &countingWaker{}, Changes: feed(f, st), Reconciler: stubReconciler{}, Clock: clk,
		Installation: inst, AdapterKinds: func() []string { return []string{"fake"} }, MaxQueued: 1 << 30,
	})
	if err != nil {
		f.Fatal(err)
	}
	fa := &fuzzAPI{h: h, secret: secret}

	status, raw := fa.post("/v1/sandboxes", []byte(`{"placement":{"allowedPools":["fake"]}}`))
	if status != http.StatusAccepted {
		f.Fatalf("create: %d %s", status, raw)
	}
	var sb httpapi.Sandbox
	if err := json.Unmarshal(raw, &sb); err != nil {
		f.Fatal(err)
	}
	v, _ := pools.View("fake")
	in, err := v.Adapter.Create(ctx, adapters.CreateRequest{ID: sb.Id, Installation: inst})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := st.UpdateSandbox(ctx, sb.Id, clk.Now(), func(cur *store.Sandbox) error {
		cur.State, cur.Pool, cur.BackendRef = store.StateRunning, "fake", in.Ref
		return nil
	}); err != nil {
		f.Fatal(err)
	}
	fa.running = sb.Id
	return fa
}

func (fa *fuzzAPI) post(path string, body []byte) (int, []byte) {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fa.secret)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	fa.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// checkAnswer fails unless status is one of allowed and, for an error, the body is the
// envelope with a code that maps to the status. A body that is not JSON at all must
// be refused as 400 or 413.
func checkAnswer(t *testing.T, what string, body []byte, status int, raw []byte, allowed ...int) {
	t.Helper()
	ok := false
	for _, s := range allowed {
		ok = ok || s == status
	}
	if !ok {
		t.Fatalf("%s %q: status %d: %s", what, body, status, raw)
	}
	if status/100 == 2 {
		if !json.Valid(body) {
			t.Fatalf("%s accepted a malformed body %q: %s", what, body, raw)
		}
		return
	}
	var env struct{ Error *api.Error }
	if err := json.Unmarshal(raw, &env); err != nil || env.Error == nil || env.Error.Code == "" {
		t.Fatalf("%s: status %d without the error envelope: %s", what, status, raw)
	}
	if env.Error.Code.HTTPStatus() != status {
		t.Fatalf("%s: status %d with code %s", what, status, env.Error.Code)
	}
	if !json.Valid(body) && status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
		t.Fatalf("%s: malformed body %q answered %d", what, body, status)
	}
}

var fuzzCreateBodies = []string{
	`{}`,
	`{"placement":{"allowedPools":["fake"]},"labels":{"app":"web"},"env":{"A":"1"},"ttlSeconds":60,"resources":{"cpu":0.5,"memoryMiB":256}}`,
	`{"capabilities":["exec","files"]}`,
	`{"capabilities":["isolation.none"]}`,
	`{"capabilities":["bogus"]}`,
	`{"capabilities":["gpu"]}`,
	`{"labels":{"differently.dev/project":"other"}}`,
	`{"labels":{"-bad":"x"}}`,
	`{"labels":{"k":"\u0000"}}`,
	`{"env":{"A=B":"x"}}`,
	`{"env":{"A":"\u0000"}}`,
	`{"ttlSeconds":-1}`,
	`{"ttlSeconds":1e30}`,
	`{"resources":{"cpu":-1}}`,
	`{"resources":{"memoryMiB":9223372036854775808}}`,
	`{"org":"other","project":"other"}`,
	`{"profile":"big"}`,
	`{"fromSnapshot":"snap_missing"}`,
	`{"template":"\xff\xfe"}`,
	`{"placement":{"allowedPools":["nope"],"regions":["mars"]}}`,
	`{"unknown":true}`,
	`{} {}`,
	`{"labels":` + strings.Repeat(`{"a":`, 100),
	`[]`,
	`null`,
	``,
	"\x00",
}

var fuzzExecBodies = []string{
	`{"command":"echo hi"}`,
	`{"args":["ls","-l"],"env":{"A":"b"},"cwd":"d","stdin":"in","timeoutSeconds":10}`,
	`{"command":"x","args":["y"]}`,
	`{"args":[""]}`,
	`{"command":"x","timeoutSeconds":7201}`,
	`{"command":"x","timeoutSeconds":-1}`,
	`{"command":"x","timeoutSeconds":99999999999999999999}`,
	`{"command":"a\u0000b"}`,
	`{"command":"x","env":{"":"v"}}`,
	`{"command":"\xff"}`,
	`{"command":"x","unknown":1}`,
	`{"command":"x"} trailing`,
	`{"command":` + strings.Repeat(`[`, 100),
	`{}`,
	`null`,
	``,
}

// FuzzCreateSandboxBody posts arbitrary bodies to POST /v1/sandboxes through the real
// router with a project token: the status is one the API documents for the route
// (or 403 for another project's org/project, 404 for a snapshot that does not exist),
// never 500; errors are the envelope
// with a matching code; a malformed body is 400 or 413.
func FuzzCreateSandboxBody(f *testing.F) {
	for _, s := range fuzzCreateBodies {
		f.Add([]byte(s))
	}
	fa := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		status, raw := fa.post("/v1/sandboxes", body)
		checkAnswer(t, "POST /v1/sandboxes", body, status, raw,
			http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound,
			http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity, http.StatusTooManyRequests,
			http.StatusServiceUnavailable)
	})
}

// FuzzExecBody posts arbitrary bodies to POST /v1/sandboxes/{id}/exec of a running
// sandbox, buffered and streamed: documented statuses only, never 500, the envelope on
// errors, 400 or 413 for a malformed body, and a streamed answer that ends with a
// final event.
func FuzzExecBody(f *testing.F) {
	for _, s := range fuzzExecBodies {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	fa := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		path := "/v1/sandboxes/" + fa.running + "/exec"
		if stream {
			path += "?stream=1"
		}
		status, raw := fa.post(path, body)
		checkAnswer(t, "POST "+path, body, status, raw,
			http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict,
			http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable)
		if status != http.StatusOK {
			return
		}
		if !stream {
			var res api.ExecResult
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatalf("exec answer %s: %v", raw, err)
			}
			return
		}
		lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
		for i, line := range lines {
			var ev api.ExecEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("stream line %q: %v", line, err)
			}
			if ev.IsFinal() != (i == len(lines)-1) {
				t.Fatalf("final event out of place in %q", raw)
			}
		}
	})
}
