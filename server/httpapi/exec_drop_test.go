package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
	"github.com/different-ai/differently/internal/ndjson"
	"github.com/different-ai/differently/server/store"
)

// droppingFake drops the connection of a streamed exec that the fake's
// execStreamDropRate cuts short, as `differently-server adapter serve` does.
type droppingFake struct{ *fake.Adapter }

func (d droppingFake) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	st, err := d.Adapter.ExecStream(ctx, ref, req, emit)
	if errors.Is(err, fake.ErrStreamDropped) {
		panic(http.ErrAbortHandler)
	}
	return st, err
}

// TestExecStreamDroppedByTheBackend: a remote pool's backend drops the connection in
// the middle of a streamed exec. The daemon has sent its status line and part of the
// output, so it ends its own stream, in either format, with a final error event
// carrying provider_unavailable, the code of a transport failure; then the sandbox
// still runs commands.
func TestExecStreamDroppedByTheBackend(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		backend := fake.New(fake.Config{ExecStreamDropRate: 1})
		srv := httptest.NewServer(adapterhttp.Handler(droppingFake{backend}, ""))
		t.Cleanup(srv.Close)
		remote, err := adapterhttp.NewClient(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.addPool("remote", remote)
		sb := e.running(e.admin, "remote")

		const want = "echo dropped\n"
		for _, accept := range []string{frames.ContentType, ndjson.ContentType} {
			got := e.execStreamed(t, sb.ID, accept, api.ExecRequest{Command: "echo dropped"})
			if out := string(got.stdout); out == "" || len(out) >= len(want) || !strings.HasPrefix(want, out) {
				t.Errorf("%s: output %q, want a start of %q", accept, out, want)
			}
			var dec ndjson.Decoder
			final, err := dec.Decode([]byte(got.final))
			if err != nil || final.Error == "" || final.Code != api.CodeProviderUnavailable || final.ExitCode != nil {
				t.Errorf("%s: final event %q (%v), want an error carrying provider_unavailable", accept, got.final, err)
			}
		}

		// The backend and the daemon stay fine: a plain exec works.
		var res api.ExecResult
		e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Command: "echo fine"}).want(t, http.StatusOK).decode(t, &res)
		if res.Stdout != "echo fine\n" || res.ExitCode != 0 {
			t.Errorf("exec after the drops: %+v", res)
		}
	})
}
