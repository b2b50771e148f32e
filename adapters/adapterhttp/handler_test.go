package adapterhttp_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
)

const token = "tok-0123456789abcdef"

// do sends a raw request and returns the response with its body read.
func do(t *testing.T, method, url string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	// NewRequest knows the length of a strings.Reader but not of a generating
	// reader; any other reader (io.MultiReader) is sent chunked.
	if lr, ok := body.(*io.LimitedReader); ok {
		req.ContentLength = lr.N
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// wantEnvelope checks the status, the protocol header and the error code of an answer.
func wantEnvelope(t *testing.T, resp *http.Response, raw []byte, status int, code api.Code) *api.Error {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, status, raw)
	}
	if got := resp.Header.Get(adapterhttp.ProtocolHeader); got != adapters.ProtocolVersion {
		t.Fatalf("protocol header = %q", got)
	}
	var env api.ErrorEnvelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Error == nil {
		t.Fatalf("body %q is not an error envelope: %v", raw, err)
	}
	if env.Error.Code != code {
		t.Fatalf("code = %s, want %s (%s)", env.Error.Code, code, env.Error.Message)
	}
	return env.Error
}

func TestAuthentication(t *testing.T) {
	srv, c := serve(t, newMem(), token)
	base := srv.URL + adapterhttp.BasePath
	for _, path := range []string{"/info", "/health", "/capacity", "/instances?installation=i", "/no/such/route"} {
		for name, hdr := range map[string][]string{
			"none":         nil,
			"wrong token":  {"Authorization", "Bearer wrong-" + token},
			"prefix":       {"Authorization", "Bearer " + token[:10]},
			"wrong scheme": {"Authorization", "Basic " + token},
			"bare token":   {"Authorization", token},
		} {
			resp, raw := do(t, http.MethodGet, base+path, nil, hdr...)
			wantEnvelope(t, resp, raw, http.StatusUnauthorized, api.CodeUnauthenticated)
			if strings.Contains(string(raw), token[:10]) {
				t.Fatalf("%s %s: 401 body quotes the token: %s", path, name, raw)
			}
		}
	}
	resp, raw := do(t, http.MethodGet, base+"/health", nil, "Authorization", "bearer "+token)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(raw)) != `{"status":"ok"}` {
		t.Fatalf("health with the token: %d %s", resp.StatusCode, raw)
	}
	if err := c.Health(t.Context()); err != nil {
		t.Fatalf("client with the token: %v", err)
	}

	wrong, err := adapterhttp.NewClient(srv.URL, "not-"+token)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Capabilities(t.Context())
	// A rejected credential is an outage of the pool, as for every provider adapter.
	e := wantCode(t, err, api.CodeProviderUnavailable)
	if strings.Contains(err.Error(), token) || e.Details["adapterCode"] != string(api.CodeUnauthenticated) {
		t.Fatalf("error %v (details %v)", err, e.Details)
	}
}

func TestErrorsNeverQuoteTheToken(t *testing.T) {
	mem := newMem()
	mem.setHealth(errors.New("backend said: bad key " + token))
	srv, _ := serve(t, mem, token)
	resp, raw := do(t, http.MethodGet, srv.URL+adapterhttp.BasePath+"/health", nil, "Authorization", "Bearer "+token)
	wantEnvelope(t, resp, raw, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
	if strings.Contains(string(raw), token) || !strings.Contains(string(raw), "[redacted]") {
		t.Fatalf("body %s", raw)
	}
}

func TestRouting(t *testing.T) {
	srv, _ := serve(t, newMem(), "")
	base := srv.URL + adapterhttp.BasePath

	resp, raw := do(t, http.MethodPost, base+"/instances/x/reboot", nil)
	wantEnvelope(t, resp, raw, http.StatusNotFound, api.CodeNotFound)
	resp, raw = do(t, http.MethodGet, base+"/nothing", nil)
	wantEnvelope(t, resp, raw, http.StatusNotFound, api.CodeNotFound)
	resp, raw = do(t, http.MethodGet, srv.URL+"/v2/info", nil)
	wantEnvelope(t, resp, raw, http.StatusNotFound, api.CodeNotFound)

	resp, raw = do(t, http.MethodPatch, base+"/instances/x", nil)
	wantEnvelope(t, resp, raw, http.StatusMethodNotAllowed, api.CodeInvalidRequest)
	if allow := resp.Header.Get("Allow"); allow != "GET, DELETE, HEAD" {
		t.Fatalf("Allow = %q", allow)
	}

	resp, raw = do(t, http.MethodGet, base+"/instances", nil)
	wantEnvelope(t, resp, raw, http.StatusBadRequest, api.CodeInvalidRequest)
	resp, raw = do(t, http.MethodGet, base+"/instances?installation=none", nil)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(raw)) != "[]" {
		t.Fatalf("empty list: %d %s", resp.StatusCode, raw)
	}
	resp, raw = do(t, http.MethodGet, base+"/instances/x/files/content", nil)
	wantEnvelope(t, resp, raw, http.StatusBadRequest, api.CodeInvalidRequest)

	resp, raw = do(t, http.MethodGet, base+"/info", nil)
	var info struct {
		Info         adapters.Info         `json:"info"`
		Capabilities adapters.Capabilities `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &info); err != nil || info.Info.Protocol != adapters.ProtocolVersion || len(info.Capabilities.Features) == 0 {
		t.Fatalf("info: %d %s", resp.StatusCode, raw)
	}
}

func TestRequestBodies(t *testing.T) {
	srv, c := serve(t, newMem(), "")
	inst := try(c.Create(t.Context(), adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)
	base := srv.URL + adapterhttp.BasePath
	exec := base + "/instances/" + url.PathEscape(inst.Ref) + "/exec"

	resp, raw := do(t, http.MethodPost, exec, strings.NewReader(`{"command":"echo hi"}`))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"stdout":"hi\n"`) {
		t.Fatalf("exec: %d %s", resp.StatusCode, raw)
	}
	for name, body := range map[string]string{
		"malformed":     `{"command":`,
		"unknown field": `{"command":"echo","shell":"bash"}`,
		"two values":    `{"command":"echo"} {}`,
		"empty":         ``,
		"wrong type":    `{"command":1}`,
	} {
		resp, raw := do(t, http.MethodPost, exec, strings.NewReader(body))
		e := wantEnvelope(t, resp, raw, http.StatusBadRequest, api.CodeInvalidRequest)
		t.Logf("%s: %s", name, e.Message)
	}
	for _, body := range []string{`{"port":0}`, `{"port":65536}`, `{"port":"80"}`} {
		resp, raw := do(t, http.MethodPost, strings.TrimSuffix(exec, "/exec")+"/ports", strings.NewReader(body))
		wantEnvelope(t, resp, raw, http.StatusBadRequest, api.CodeInvalidRequest)
	}

	// 5 MiB of JSON: refused by its declared length, and when sent chunked, by reading.
	big := `{"command":"echo ` + strings.Repeat("a", 5<<20) + `"}`
	resp, raw = do(t, http.MethodPost, exec, strings.NewReader(big))
	wantEnvelope(t, resp, raw, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
	resp, raw = do(t, http.MethodPost, exec, io.MultiReader(strings.NewReader(big)))
	wantEnvelope(t, resp, raw, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)

	_, err := c.Exec(t.Context(), inst.Ref, api.ExecRequest{Command: "echo", Stdin: strings.Repeat("a", 5<<20)})
	wantCode(t, err, api.CodePayloadTooLarge)
}

// zeros generates content without holding it in memory.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestFileSizeLimit(t *testing.T) {
	srv, c := serve(t, newMem(), "")
	inst := try(c.Create(t.Context(), adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)
	target := srv.URL + adapterhttp.BasePath + "/instances/" + url.PathEscape(inst.Ref) + "/files/content?path=/big"

	// Declared length: refused before the body is read.
	resp, raw := do(t, http.MethodPut, target, io.LimitReader(zeros{}, api.MaxFileBytes+1))
	wantEnvelope(t, resp, raw, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
	// Chunked: refused once the limit is crossed.
	resp, raw = do(t, http.MethodPut, target, io.MultiReader(io.LimitReader(zeros{}, api.MaxFileBytes+1)))
	wantEnvelope(t, resp, raw, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)

	// The client refuses before sending.
	err := c.WriteFile(t.Context(), inst.Ref, "/big", make([]byte, api.MaxFileBytes+1))
	wantCode(t, err, api.CodePayloadTooLarge)
	if _, err := c.ReadFile(t.Context(), inst.Ref, "/big"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("an oversized write left a file behind: %v", err)
	}
}

func TestPanickingAdapter(t *testing.T) {
	mem := newMem()
	srv, c := serve(t, mem, "")
	inst := try(c.Create(t.Context(), adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)

	_, err := c.Exec(t.Context(), inst.Ref, api.ExecRequest{Command: "panic"})
	wantCode(t, err, api.CodeInternal)
	// Before any output, a streamed exec still answers with the envelope.
	_, err = c.ExecStream(t.Context(), inst.Ref, api.ExecRequest{Command: "panic"}, func(api.ExecEvent) error { return nil })
	wantCode(t, err, api.CodeInternal)
	// After output, only the final line can say it.
	var got []string
	_, err = c.ExecStream(t.Context(), inst.Ref, api.ExecRequest{Command: "panic-after"}, func(ev api.ExecEvent) error {
		got = append(got, ev.Data)
		return nil
	})
	if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, "panicked") || len(got) != 1 {
		t.Fatalf("error %v after events %q", err, got)
	}
	// The server is still up.
	resp, raw := do(t, http.MethodGet, srv.URL+adapterhttp.BasePath+"/health", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health after panics: %d %s", resp.StatusCode, raw)
	}
}

// TestBrowsersAreRefused: a web page cannot reach an adapter through the operator's
// browser, with or without a token: a request carrying Origin or Sec-Fetch-Site is
// refused before it reaches the adapter, and a tokenless adapter answers only
// requests addressed to a loopback host (DNS rebinding names it otherwise).
func TestBrowsersAreRefused(t *testing.T) {
	const create = `{"id":"sbx_evil","installation":"inst_evil"}`
	for _, tok := range []string{"", token} {
		mem := newMem()
		srv, _ := serve(t, mem, tok)
		base := srv.URL + adapterhttp.BasePath
		auth := []string{}
		if tok != "" {
			auth = []string{"Authorization", "Bearer " + tok}
		}
		for name, hdr := range map[string][]string{
			"cross-site form post": {"Content-Type", "text/plain", "Origin", "https://evil.example"},
			"same-origin fetch":    {"Content-Type", "application/json", "Origin", srv.URL},
			"fetch metadata only":  {"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"},
		} {
			resp, raw := do(t, http.MethodPost, base+"/instances", strings.NewReader(create), append(hdr, auth...)...)
			wantEnvelope(t, resp, raw, http.StatusForbidden, api.CodeForbidden)
			if n := mem.count(); n != 0 {
				t.Fatalf("token %q, %s: %d instances made", tok, name, n)
			}
		}
		// A request addressed to another name: refused without a token, served with one.
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "evil.example:80"
		for i := 0; i+1 < len(auth); i += 2 {
			req.Header.Set(auth[i], auth[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{true: http.StatusForbidden, false: http.StatusOK}[tok == ""]; resp.StatusCode != want {
			t.Fatalf("token %q, Host evil.example: %d, want %d", tok, resp.StatusCode, want)
		}
	}
	// The control plane's own client, without a token, on loopback, is served.
	_, c := serve(t, newMem(), "")
	if err := c.Health(t.Context()); err != nil {
		t.Fatalf("the client without a token: %v", err)
	}
}
