package adapterhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
)

func TestNewClientValidatesTheEndpoint(t *testing.T) {
	for _, bad := range []string{"", "127.0.0.1:9000", "ftp://host", "http://", "http://user:pw@host", "http://host/?a=b", "http://host/#x", "http://[::1"} {
		if _, err := adapterhttp.NewClient(bad, ""); !api.IsCode(err, api.CodeInvalidRequest) {
			t.Errorf("NewClient(%q) = %v, want invalid_request", bad, err)
		}
	}
	for _, good := range []string{"http://127.0.0.1:9000", "https://adapter.internal:8443/", "http://host/prefix"} {
		if _, err := adapterhttp.NewClient(good, "t"); err != nil {
			t.Errorf("NewClient(%q) = %v", good, err)
		}
	}
}

func TestClientHonoursAPathPrefix(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/plugins/lab/", http.StripPrefix("/plugins/lab", adapterhttp.Handler(newMem(), "")))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := try(adapterhttp.NewClient(srv.URL+"/plugins/lab/", "")).ok(t)
	noErr(t, c.Health(t.Context()))
}

func TestProtocolVersionIsChecked(t *testing.T) {
	for name, header := range map[string]string{"missing": "", "mismatched": "2"} {
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			if header != "" {
				w.Header().Set(adapterhttp.ProtocolHeader, header)
			}
			_, _ = io.WriteString(w, `{"status":"ok"}`)
		})
		err := c.Health(t.Context())
		if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, "protocol") {
			t.Fatalf("%s: message %q does not mention the protocol", name, e.Message)
		}
	}

	c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
		_, _ = io.WriteString(w, `{"info":{"kind":"x","protocol":"2"},"capabilities":{"features":["exec"]}}`)
	})
	_, err := c.Capabilities(t.Context())
	if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, `"2"`) {
		t.Fatalf("info.protocol mismatch: %q", e.Message)
	}
	if c.Info().Kind != "remote" {
		t.Fatalf("a rejected /info was recorded: %+v", c.Info())
	}
}

func TestAnswersWithoutEnvelope(t *testing.T) {
	for name, fn := range map[string]http.HandlerFunc{
		"502 from the plugin": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
		},
		"502 from a proxy": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		},
		"envelope without code": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `{"error":{"message":"x"}}`)
		},
	} {
		c := rawServer(t, fn)
		_, err := c.Get(t.Context(), "r")
		if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, "502") {
			t.Fatalf("%s: message %q", name, e.Message)
		}
	}

	c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
		_, _ = io.WriteString(w, `{"ref":`)
	})
	_, err := c.Get(t.Context(), "r")
	wantCode(t, err, api.CodeProviderUnavailable)
}

func TestEnvelopePassesThrough(t *testing.T) {
	c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = io.WriteString(w, `{"error":{"code":"unsupported_operation","message":"no","details":{"operation":"pause"}}}`)
	})
	e := wantCode(t, c.Pause(t.Context(), "r"), api.CodeUnsupportedOperation)
	if e.Message != "no" || e.Details["operation"] != "pause" {
		t.Fatalf("error %+v", e)
	}
	// Delete and DeleteSnapshot only forgive not_found.
	wantCode(t, c.Delete(t.Context(), "r"), api.CodeUnsupportedOperation)

	nf := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"gone"}}`)
	})
	noErr(t, nf.Delete(t.Context(), "r"))
	noErr(t, nf.DeleteSnapshot(t.Context(), "s"))
	_, err := nf.Get(t.Context(), "r")
	wantCode(t, err, api.CodeNotFound)
}

// dropFirstCreate delivers the first Create to the server, then loses its answer, as
// a connection reset after the server committed would.
type dropFirstCreate struct {
	dropped atomic.Bool
}

func (d *dropFirstCreate) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || r.URL.Path != adapterhttp.BasePath+"/instances" || !d.dropped.CompareAndSwap(false, true) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return nil, errors.New("connection reset by peer (simulated)")
}

func TestCreateIsIdempotentAfterALostAnswer(t *testing.T) {
	ctx := t.Context()
	drop := &dropFirstCreate{}
	_, c := serve(t, newMem(), "", adapterhttp.WithHTTPClient(&http.Client{Transport: drop}))
	req := adapters.CreateRequest{ID: "sbx_1", Installation: "inst_a"}

	_, err := c.Create(ctx, req)
	wantCode(t, err, api.CodeProviderUnavailable)
	if !drop.dropped.Load() {
		t.Fatal("the first answer was not dropped")
	}
	inst := try(c.Create(ctx, req)).ok(t)
	again := try(c.Create(ctx, req)).ok(t)
	list := try(c.List(ctx, "inst_a")).ok(t)
	if inst.Ref != again.Ref || len(list) != 1 || list[0].Ref != inst.Ref {
		t.Fatalf("refs %q %q, list %+v", inst.Ref, again.Ref, list)
	}
}

func TestCancellationReachesTheAdapter(t *testing.T) {
	mem := newMem()
	_, c := serve(t, mem, "")
	inst := try(c.Create(t.Context(), adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)

	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-mem.entered
		cancel()
	}()
	_, err := c.Exec(ctx, inst.Ref, api.ExecRequest{Command: "block"})
	wantCode(t, err, api.CodeProviderUnavailable)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v does not say the caller canceled", err)
	}
	// The server saw the client go and cancelled the adapter's call.
	<-mem.canceled
}

func TestReadFileOverTheLimit(t *testing.T) {
	for name, declare := range map[string]bool{"declared length": true, "chunked": false} {
		t.Run(name, func(t *testing.T) {
			c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
				w.Header().Set("Content-Type", "application/octet-stream")
				if declare {
					w.Header().Set("Content-Length", strconv.Itoa(api.MaxFileBytes+1))
				}
				_, _ = io.Copy(w, io.LimitReader(zeros{}, api.MaxFileBytes+1))
			})
			if _, err := c.ReadFile(t.Context(), "r", "/big"); !api.IsCode(err, api.CodePayloadTooLarge) {
				t.Fatalf("%s: %v, want payload_too_large", name, err)
			}
		})
	}
}

func TestEmptyArgumentsAreRefusedLocally(t *testing.T) {
	c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
	})
	ctx := t.Context()
	_, err := c.Get(ctx, "")
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = c.List(ctx, "")
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = c.ReadFile(ctx, "r", "")
	wantCode(t, err, api.CodeInvalidRequest)
	wantCode(t, c.DeleteSnapshot(ctx, ""), api.CodeInvalidRequest)
}

// A List answered with null is refused; an empty list is a list.
func TestListNullIsNotEmpty(t *testing.T) {
	for body, wantErr := range map[string]bool{"null": true, "[]": false} {
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		})
		got, err := c.List(t.Context(), "inst")
		if wantErr {
			wantCode(t, err, api.CodeProviderUnavailable)
			continue
		}
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("List of []: %v, %v", got, err)
		}
	}
}

// TestDeleteOnAWrongEndpoint: a pool whose endpoint has the wrong base path gets "no
// route" for everything; Delete must say so instead of taking it for an instance
// already gone, which would strand the instance. A plain not_found is still success.
func TestDeleteOnAWrongEndpoint(t *testing.T) {
	mem := newMem()
	srv, c := serve(t, mem, token)
	inst, err := c.Create(t.Context(), adapters.CreateRequest{ID: "sbx_1", Installation: "inst"})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := adapterhttp.NewClient(srv.URL+"/extra", token)
	if err != nil {
		t.Fatal(err)
	}
	if err := wrong.Delete(t.Context(), inst.Ref); !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("delete through a wrong endpoint: %v, want provider_unavailable", err)
	}
	if mem.count() != 1 {
		t.Fatal("the instance went")
	}
	if err := c.Delete(t.Context(), inst.Ref); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), inst.Ref); err != nil {
		t.Fatalf("delete of an instance already gone: %v", err)
	}
}

// hostilePlugin answers every request with answer, behind the protocol header.
func hostilePlugin(t *testing.T, answer http.HandlerFunc) *adapterhttp.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return try(adapterhttp.NewClient(srv.URL, "")).ok(t)
}

// TestHostilePluginIsBounded: what a plugin answers is held to the contract's
// limits before it reaches a tenant or memory: exec output is cut at the cap and
// marked truncated, a file's declared length is not allocated on the plugin's word,
// and output on a stream that does not exist ends the stream.
func TestHostilePluginIsBounded(t *testing.T) {
	big := strings.Repeat("é", api.MaxExecOutputBytes) // twice the cap, in bytes
	c := hostilePlugin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(api.ExecResult{ExitCode: 0, Stdout: big, Stderr: "short"})
	})
	res, err := c.Exec(t.Context(), "i-1", api.ExecRequest{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) > api.MaxExecOutputBytes || len(res.Stdout) < api.MaxExecOutputBytes-1 || !utf8.ValidString(res.Stdout) ||
		!res.Truncated || res.Stderr != "short" {
		t.Fatalf("stdout %d bytes (valid %v), stderr %q, truncated %v", len(res.Stdout), utf8.ValidString(res.Stdout), res.Stderr, res.Truncated)
	}

	c = hostilePlugin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(api.MaxFileBytes))
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("a few bytes, then the plugin hangs up"))
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := c.ReadFile(t.Context(), "i-1", "/f"); err == nil {
		t.Fatal("a cut file read succeeded")
	}
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
		t.Fatalf("a file declared at %d MiB that never came allocated %d MiB", api.MaxFileBytes>>20, grown>>20)
	}

	c = hostilePlugin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"stream":"system","data":"injected"}`)
		fmt.Fprintln(w, `{"exitCode":0}`)
	})
	var got []api.ExecEvent
	_, err = c.ExecStream(t.Context(), "i-1", api.ExecRequest{Command: "true"}, func(ev api.ExecEvent) error {
		got = append(got, ev)
		return nil
	})
	if !api.IsCode(err, api.CodeProviderUnavailable) || len(got) != 0 {
		t.Fatalf("a made-up stream: %v, events %+v", err, got)
	}
}

// slowStart is an adapter whose Create waits for its context to end and then says
// what a hosted adapter says: a sandbox still starting at the deadline failed, a
// cancelled wait is an outage.
type slowStart struct{ *memAdapter }

func (slowStart) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	<-ctx.Done()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return adapters.Instance{}, adapters.SandboxFailed("sandbox %s was still starting when the wait ended", req.ID)
	}
	return adapters.Instance{}, adapters.Unavailable("cancelled")
}

// TestThePluginMeetsTheCallersDeadline: the caller's deadline travels to the plugin,
// which meets it first and answers sandbox_failed for a sandbox still starting,
// instead of having its request cut, which the control plane reads as the pool down.
func TestThePluginMeetsTheCallersDeadline(t *testing.T) {
	_, c := serve(t, slowStart{newMem()}, token)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := c.Create(ctx, adapters.CreateRequest{ID: "sbx_slow", Installation: "inst"})
	if !api.IsCode(err, api.CodeSandboxFailed) {
		t.Fatalf("create past the deadline: %v, want sandbox_failed", err)
	}
}
