package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/different-ai/differently/server/config"
)

// console.enabled: false leaves /ui to the API, which answers it as any unknown
// path: no page, no console headers.
func TestConsoleDisabled(t *testing.T) {
	cfg := config.Default()
	cfg.Console.Enabled = false
	dd := startDaemonWith(t, cfg)
	b := newBrowser(t, dd.url)
	for _, path := range []string{"/ui", "/ui/signin", "/ui/static/console.js"} {
		resp, body := b.get(path)
		if resp.StatusCode == http.StatusOK || resp.Header.Get("Content-Security-Policy") != "" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("GET %s with the console off: %d %q\n%s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	// The API itself is unaffected.
	if _, err := dd.c.ListPools(t.Context()); err != nil {
		t.Fatal(err)
	}
}
