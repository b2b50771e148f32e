package daytona

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/daytona/daytonafake"
	"github.com/different-ai/differently/internal/ids"
)

const testKey = "dtn_test_key_3f9a1c"

// setup serves a fake Daytona on loopback and returns an adapter pointed at it.
func setup(t *testing.T, class string, mods ...func(*daytonafake.Server)) (*Adapter, *daytonafake.Server) {
	t.Helper()
	fake := daytonafake.New(testKey, t.TempDir())
	fake.Class = class
	fake.BaseSnapshots = []string{"base-snap", "other-snap"}
	for _, m := range mods {
		m(fake)
	}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	a, err := New(Config{APIURL: srv.URL, Target: "eu", Class: class, Snapshot: "base-snap"}, testKey,
		WithHTTPClient(srv.Client()), WithPollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return a, fake
}

func request(installation string) adapters.CreateRequest {
	id := ids.New("sbx")
	return adapters.CreateRequest{
		ID:           id,
		Installation: installation,
		Env:          map[string]string{"BASE": "from-create"},
		Labels:       map[string]string{"team": "blue"},
	}
}

// readBody returns r's body and puts it back for the real handler.
func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}
