//go:build opensandbox_live

package opensandbox

import (
	"os"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters/conformance"
)

// TestLiveOpenSandbox runs the conformance suite against a real server:
//
//	OPENSANDBOX_URL=http://localhost:8080/v1 OPENSANDBOX_API_KEY=... \
//	  go test -tags opensandbox_live -run TestLiveOpenSandbox ./adapters/opensandbox/
//
// Optional: OPENSANDBOX_IMAGE (default ubuntu:24.04), OPENSANDBOX_RUNTIME (docker or
// kubernetes), OPENSANDBOX_SERVER_PROXY=1, OPENSANDBOX_PORTS=signed.
func TestLiveOpenSandbox(t *testing.T) {
	url, key := os.Getenv("OPENSANDBOX_URL"), os.Getenv("OPENSANDBOX_API_KEY")
	if url == "" || key == "" {
		t.Skip("set OPENSANDBOX_URL and OPENSANDBOX_API_KEY to run against a real server")
	}
	cfg := map[string]any{"apiURL": url, "image": "ubuntu:24.04"}
	if v := os.Getenv("OPENSANDBOX_IMAGE"); v != "" {
		cfg["image"] = v
	}
	if v := os.Getenv("OPENSANDBOX_RUNTIME"); v != "" {
		cfg["runtime"] = v
	}
	if os.Getenv("OPENSANDBOX_SERVER_PROXY") == "1" {
		cfg["useServerProxy"] = true
	}
	if v := os.Getenv("OPENSANDBOX_PORTS"); v != "" {
		cfg["ports"] = v
	}
	a, err := FromConfig(cfg, strings.TrimSpace(key))
	if err != nil {
		t.Fatal(err)
	}
	conformance.Test(t, a, conformance.Options{WorkDir: "/tmp"})
}
