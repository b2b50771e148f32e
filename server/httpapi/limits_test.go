package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

// onSQLite runs fn on a fresh SQLite store only: the limits are enforced before any
// store is touched, and their megabytes are slow enough (under -race) to pay once.
func onSQLite(t *testing.T, fn func(t *testing.T, st store.Store)) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fn(t, st)
}

// limitFixture holds one existing object of every kind a path parameter names.
type limitFixture struct {
	fill *strings.Replacer
}

func (e *env) limitFixture() limitFixture {
	e.t.Helper()
	sb := e.running(e.admin, "fake")
	var snap httpapi.Snapshot
	e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/snapshots", map[string]any{}).want(e.t, http.StatusCreated).decode(e.t, &snap)
	e.do(e.admin, "PUT", "/v1/admin/profiles/ci", map[string]any{}).want(e.t, http.StatusOK)
	var tok httpapi.TokenCreated
	e.do(e.admin, "POST", "/v1/admin/tokens", map[string]any{"scope": "admin"}).want(e.t, http.StatusCreated).decode(e.t, &tok)
	return limitFixture{fill: strings.NewReplacer("/sandboxes/{id}", "/sandboxes/"+sb.ID, "/snapshots/{id}", "/snapshots/"+snap.Id,
		"/pools/{name}", "/pools/fake", "/profiles/{name}", "/profiles/ci", "/tokens/{id}", "/tokens/"+tok.Token.Id,
		"{org}", "acme", "{project}", "b")}
}

// padded is a sample body grown with trailing spaces to n bytes: still the same
// JSON value, so only its size can get it refused.
func padded(sample string, n int) []byte {
	return append([]byte(sample), bytes.Repeat([]byte(" "), n-len(sample))...)
}

// TestJSONBodyLimitEveryRoute: every operation of the document that takes a JSON
// body answers 413 payload_too_large to one byte over api.MaxJSONBodyBytes, whether
// the length is declared or the body is chunked, and changes nothing; the same body
// at exactly the limit is not refused for its size.
func TestJSONBodyLimitEveryRoute(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		rec := &countingReconciler{}
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.Reconciler = rec })
		fx := e.limitFixture()
		checked := 0
		for _, o := range documentedOps(t) {
			if o.body != "application/json" {
				continue
			}
			checked++
			sample, ok := sampleBodies[o.id]
			if !ok {
				t.Fatalf("%s takes a body and sampleBodies has none for it", o)
			}
			path := fx.fill.Replace(o.path)
			if strings.Contains(path, "{") {
				t.Fatalf("%s: no value for a path parameter", o)
			}
			if len(o.query) > 0 {
				t.Fatalf("%s: required query parameters %v are not filled in", o, o.query)
			}
			hdr := http.Header{"Content-Type": {"application/json"}}
			before := e.adminState(rec)
			over := padded(sample, api.MaxJSONBodyBytes+1)
			e.request(e.admin, o.method, path, bytes.NewReader(over), hdr).want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
			// Chunked: no length to refuse up front, so the decoder meets the limit.
			r := e.request(e.admin, o.method, path, io.MultiReader(bytes.NewReader(over)), hdr)
			r.want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
			if after := e.adminState(rec); after != before {
				t.Fatalf("%s: a refused body changed state:\nbefore %s\nafter  %s", o, before, after)
			}
			if r := e.request(e.admin, o.method, path, bytes.NewReader(padded(sample, api.MaxJSONBodyBytes)), hdr); r.status == http.StatusRequestEntityTooLarge {
				t.Fatalf("%s: a body of exactly the limit was refused: %s", o, r.body)
			}
		}
		if checked < 12 {
			t.Fatalf("only %d operations take JSON", checked)
		}
	})
}

// countingFS counts the writes that reach a fake backend.
type countingFS struct {
	*fake.Adapter
	writes int
}

func (c *countingFS) WriteFile(ctx context.Context, ref, p string, data []byte) error {
	c.writes++
	return c.Adapter.WriteFile(ctx, ref, p, data)
}

// WriteFileFrom counts the streamed writes that wrote something: a refused upload
// may begin at the backend, but must fail there.
func (c *countingFS) WriteFileFrom(ctx context.Context, ref, p string, content io.Reader) error {
	err := c.Adapter.WriteFileFrom(ctx, ref, p, content)
	if err == nil {
		c.writes++
	}
	return err
}

// TestFileUploadLimitWritesNothing: an upload over api.MaxFileBytes answers 413
// payload_too_large and leaves the backend as it was: an existing file keeps its
// content, a new one is not created, no temporary file is left on a devhost disk,
// and the backend's WriteFile is never called.
func TestFileUploadLimitWritesNothing(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		counting := &countingFS{Adapter: fake.New(fake.Config{})}
		e.addPool("counting", counting)
		for _, pool := range []string{"devhost", "counting"} {
			sb := e.running(e.admin, pool)
			base := "/v1/sandboxes/" + sb.ID + "/files/content?path="
			e.do(e.admin, "PUT", base+"kept.txt", "original").want(t, http.StatusNoContent)
			writes := counting.writes
			big := func() io.Reader { return io.LimitReader(zeros{}, api.MaxFileBytes+1) }
			// Declared length over the limit, onto the existing file; chunked, onto it
			// and onto a new one.
			e.request(e.admin, "PUT", base+"kept.txt", big(), nil).want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
			e.request(e.admin, "PUT", base+"kept.txt", io.MultiReader(big()), nil).want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
			e.request(e.admin, "PUT", base+"new.bin", io.MultiReader(big()), nil).want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)

			if got := e.do(e.admin, "GET", base+"kept.txt", nil).want(t, http.StatusOK); string(got.body) != "original" {
				t.Fatalf("%s: the existing file now holds %d bytes", pool, len(got.body))
			}
			e.do(e.admin, "GET", base+"new.bin", nil).want(t, http.StatusNotFound, api.CodeNotFound)
			if pool == "counting" && counting.writes != writes {
				t.Fatalf("refused uploads reached the backend's WriteFile %d times", counting.writes-writes)
			}
			if pool == "devhost" {
				v, _ := e.pools.View("devhost")
				root := v.Pool.Config["root"].(string)
				_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					if err != nil {
						t.Fatal(err)
					}
					if info, _ := d.Info(); info != nil && !d.IsDir() && info.Size() > 1<<20 {
						t.Fatalf("a refused upload left %s (%d bytes) on the devhost disk", p, info.Size())
					}
					return nil
				})
			}
		}
	})
}

// bigEmitter streams one output event far larger than a stream line may be.
type bigEmitter struct {
	*fake.Adapter
	size int
}

func (b *bigEmitter) ExecStream(_ context.Context, _ string, _ api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	if err := emit(api.ExecEvent{Stream: "stdout", Data: strings.Repeat("é", b.size/2)}); err != nil {
		return adapters.ExitStatus{}, err
	}
	return adapters.ExitStatus{Code: 0}, nil
}

// TestStreamedLinesStayUnderTheLimit: however large an event an adapter emits, the
// API's stream never sends a line over api.MaxStreamLineBytes (it splits the output,
// on rune boundaries), so the Go client, which refuses longer lines, reads it all.
func TestStreamedLinesStayUnderTheLimit(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		const size = api.MaxStreamLineBytes + 3<<20
		e.addPool("big", &bigEmitter{Adapter: fake.New(fake.Config{}), size: size})
		sb := e.running(e.admin, "big")
		body, _ := json.Marshal(api.ExecRequest{Command: "x"})
		r := e.request(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec?stream=1", bytes.NewReader(body), nil).want(t, http.StatusOK)
		lines := bytes.Split(bytes.TrimSuffix(r.body, []byte("\n")), []byte("\n"))
		if len(lines) < 3 {
			t.Fatalf("%d lines: the output was not split", len(lines))
		}
		for i, l := range lines {
			if len(l) > api.MaxStreamLineBytes {
				t.Fatalf("line %d is %d bytes", i, len(l))
			}
		}

		c, err := client.New(e.url, e.admin)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		var final bool
		for ev, err := range c.ExecSandboxStream(t.Context(), sb.ID, api.ExecRequest{Command: "x"}) {
			if err != nil {
				t.Fatal(err)
			}
			out.WriteString(ev.Data)
			final = ev.IsFinal()
		}
		if !final || out.String() != strings.Repeat("é", size/2) {
			t.Fatalf("read %d bytes of %d, final event %v", out.Len(), size, final)
		}
	})
}

// An upload whose body stops coming is cut off at the read deadline instead of
// holding its connection, and what it sent, for as long as the client likes: the
// answer is 400 and nothing is written.
func TestStalledUploadIsCutOff(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.UploadReadTimeout = 200 * time.Millisecond })
		counting := &countingFS{Adapter: fake.New(fake.Config{})}
		e.addPool("counting", counting)
		sb := e.running(e.admin, "counting")
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "PUT /v1/sandboxes/%s/files/content?path=stalled.txt HTTP/1.1\r\nHost: test\r\n"+
			"Authorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n0123456789", sb.ID, e.admin)
		// A guard against a hang, not a wait for state: the answer comes once the
		// server's own deadline passes.
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a stalled upload: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || counting.writes != 0 {
			t.Fatalf("stalled upload: status %d, %d writes", resp.StatusCode, counting.writes)
		}
	})
}

// A JSON body that stops coming is cut off at its read deadline too: 400, and the
// connection is not held.
func TestStalledJSONBodyIsCutOff(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.BodyReadTimeout = 200 * time.Millisecond })
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/sandboxes HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"labels\":", e.admin)
		// A guard against a hang, not a wait for state.
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a stalled body: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !resp.Close {
			t.Fatalf("stalled body: status %d, connection closed %v", resp.StatusCode, resp.Close)
		}
	})
}

// The body's deadline ends with the body: a streamed exec that outlasts it runs to
// its end (net/http reads the connection in the background once the body is read,
// and a deadline passing then would look like a client that hung up).
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.BodyReadTimeout = 50 * time.Millisecond })
		sb := e.running(e.admin, "devhost")
		r := e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec?stream=1",
			api.ExecRequest{Command: "sleep 0.5; echo done"}).want(t, http.StatusOK)
		if !strings.Contains(string(r.body), `"data":"done\n"`) || !strings.Contains(string(r.body), `"exitCode":0`) {
			t.Fatalf("the stream did not run to its end: %s", r.body)
		}
	})
}
