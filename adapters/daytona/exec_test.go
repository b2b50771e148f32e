package daytona

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/daytona/daytonafake"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

// jsonLimit stands in for httpx.MaxJSONBody, which an exec answer of 70 MB used to
// go over: a few megabytes of output go over this one as surely, and quickly.
const jsonLimit = 1 << 20

// bigOutput is more output than jsonLimit and api.MaxExecOutputBytes.
const bigOutput = 3_000_000

func withClientOptions(opts ...httpx.Option) Option {
	return func(o *options) { o.httpx = append(o.httpx, opts...) }
}

// limited returns an adapter whose clients refuse JSON answers over jsonLimit, and
// a started sandbox.
func limited(t *testing.T) (*Adapter, *daytonafake.Server, string) {
	t.Helper()
	a, fake := setup(t, ClassContainer)
	a, err := New(a.cfg, testKey, WithHTTPClient(a.http), WithPollInterval(time.Millisecond),
		withClientOptions(httpx.WithMaxJSONBody(jsonLimit)))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := a.Create(t.Context(), request(ids.New("inst")))
	if err != nil {
		t.Fatal(err)
	}
	return a, fake, inst.Ref
}

// TestExecOutputOverTheCap: a command writing more than any buffer holds is a
// result: its exit code, the first api.MaxExecOutputBytes of its output and
// Truncated. A listing over the limit still fails, so the limit is in force.
func TestExecOutputOverTheCap(t *testing.T) {
	a, fake, ref := limited(t)
	tests := []struct {
		command   string
		exit      int
		truncated bool
	}{
		{"head -c 3000000 /dev/zero | tr '\\0' a", 0, true},
		{"head -c 3000000 /dev/zero | tr '\\0' a; exit 3", 3, true},
		{"head -c 1048576 /dev/zero | tr '\\0' a", 0, false},
	}
	for _, tt := range tests {
		res, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: tt.command})
		if err != nil {
			t.Fatalf("%s: %v", tt.command, err)
		}
		if res.ExitCode != tt.exit || res.Truncated != tt.truncated || res.Stdout != strings.Repeat("a", api.MaxExecOutputBytes) {
			t.Errorf("%s: exit %d truncated %v, %d bytes of stdout; want %d, %v, %d",
				tt.command, res.ExitCode, res.Truncated, len(res.Stdout), tt.exit, tt.truncated, api.MaxExecOutputBytes)
		}
	}
	fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/files") {
			return false
		}
		_, _ = io.WriteString(w, `[{"name":"`+strings.Repeat("f", jsonLimit)+`"}]`)
		return true
	})
	if _, err := a.ListFiles(t.Context(), ref, "/"); !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), "over 1 MiB") {
		t.Errorf("a listing over the limit: %v", err)
	}
}

// TestExecAnswerShapes: the exit code is found wherever it is in the answer, and
// unknown members are skipped, however large; an answer that is not the JSON object
// expected is provider_unavailable, never a result.
func TestExecAnswerShapes(t *testing.T) {
	big := strings.Repeat("b", bigOutput)
	kept := big[:api.MaxExecOutputBytes]
	tests := []struct {
		name, body string
		exit       int
		stdout     string
		truncated  bool
		err        string
	}{
		{"exit code after the output", `{"result":"` + big + `","exitCode":5}`, 5, kept, true, ""},
		{"unknown members", `{"stats":{"cpu":[1,2]},"note":"` + big + `","exitCode":2,"result":"ok"}`, 2, "ok", false, ""},
		{"cut short", `{"exitCode":0,"result":"abc`, 0, "", false, "malformed answer to POST /process/execute"},
		{"not JSON", `exit 0`, 0, "", false, "malformed answer"},
		{"result not a string", `{"exitCode":0,"result":42}`, 0, "", false, "malformed answer"},
		{"exit code not a number", `{"exitCode":"0","result":""}`, 0, "", false, "malformed answer"},
		{"empty", ``, 0, "", false, "malformed answer"},
	}
	a, fake, ref := limited(t)
	for _, tt := range tests {
		fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/process/execute") {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, tt.body)
			return true
		})
		res, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "true"})
		switch {
		case tt.err != "":
			if !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %+v, %v; want provider_unavailable saying %q", tt.name, res, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case res.ExitCode != tt.exit || res.Stdout != tt.stdout || res.Truncated != tt.truncated:
			t.Errorf("%s: exit %d, stdout %.10q (%d bytes), truncated %v", tt.name, res.ExitCode, res.Stdout, len(res.Stdout), res.Truncated)
		}
	}
}
