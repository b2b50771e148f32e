package httpapi_test

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// recordHandler passes every record, Debug included, to a channel.
type recordHandler struct{ records chan slog.Record }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.records <- r
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// ctxAdapter streams one line of output, then waits for the request to end and
// returns the context's own error, as an adapter that adds nothing to it does.
type ctxAdapter struct{ *fake.Adapter }

func (a ctxAdapter) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	if err := emit(api.ExecEvent{Stream: api.StreamStdout, Data: "started\n"}); err != nil {
		return adapters.ExitStatus{}, err
	}
	<-ctx.Done()
	return adapters.ExitStatus{}, ctx.Err()
}

// A client that hangs up on a streamed exec is not an error of the daemon: the end
// of the stream is logged at Debug as a disconnect, not at Error.
func TestExecStreamHangUpIsNotAnError(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		logs := recordHandler{records: make(chan slog.Record, 64)}
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.Logger = slog.New(logs) })
		e.addPool("ctx", ctxAdapter{fake.New(fake.Config{})})
		for _, pool := range []string{"ctx", "devhost"} {
			sb := e.running(e.admin, pool)
			ctx, cancel := context.WithCancel(t.Context())
			req, err := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/sandboxes/"+sb.ID+"/exec?stream=1",
				strings.NewReader(`{"command":"echo started; sleep 60"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+e.admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if err != nil || !strings.Contains(line, "started") {
				t.Fatalf("%s: first event %q: %v", pool, line, err)
			}
			cancel()
			resp.Body.Close()
			// A guard against a hang, not a wait for state: the record comes as the
			// handler ends.
			guard := time.After(20 * time.Second)
		wait:
			for {
				select {
				case r := <-logs.records:
					if !strings.Contains(r.Message, "exec") {
						continue
					}
					if r.Level >= slog.LevelError || !strings.Contains(r.Message, "disconnect") {
						t.Fatalf("%s: a hang-up logged at %s: %q", pool, r.Level, r.Message)
					}
					break wait
				case <-guard:
					t.Fatalf("%s: the hang-up was not logged as a disconnect", pool)
				}
			}
		}
	})
}

// stream= takes the document's four values; another is 400 invalid_request naming
// the parameter, not a buffered answer the client did not ask for.
func TestExecStreamParameter(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		sb := e.running(e.admin, "fake")
		for _, v := range []string{"yes", "TRUE", "2", "", "on"} {
			r := e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec?stream="+v, api.ExecRequest{Command: "true"}).
				want(t, http.StatusBadRequest, api.CodeInvalidRequest)
			if got := r.apiError(t).Details["parameter"]; got != "stream" {
				t.Errorf("stream=%s: parameter %v", v, got)
			}
		}
		for v, ct := range map[string]string{"0": "application/json", "false": "application/json", "1": "application/x-ndjson", "true": "application/x-ndjson"} {
			r := e.do(e.admin, "POST", "/v1/sandboxes/"+sb.ID+"/exec?stream="+v, api.ExecRequest{Command: "true"}).want(t, http.StatusOK)
			if got := r.header.Get("Content-Type"); !strings.HasPrefix(got, ct) {
				t.Errorf("stream=%s: %s", v, got)
			}
		}
	})
}
