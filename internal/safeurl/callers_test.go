package safeurl_test

import (
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/client"
)

// An endpoint refused for its form is described in the error without the
// credentials it may carry: they would reach a pool's lastError, the log, and
// Terraform's diagnostics. Each URL below holds the secret "pw-9f3k".
func TestRefusedEndpointsAreNotQuotedWithCredentials(t *testing.T) {
	urls := []string{
		"https://user:pw-9f3k%zz@plugin.internal:8443", // does not parse
		"user:pw-9f3k@plugin.internal:8443",            // no scheme
		"ftp://user:pw-9f3k@plugin.internal",           // wrong scheme
		"https://user:pw-9f3k@",                        // no host
		"https://plugin.internal/?token=pw-9f3k",       // a query
		"https://user:pw-9f3k/x@plugin.internal",       // a "/" in the password
		"https://user:pw-9f3k#x@plugin.internal",       // a "#" in the password
	}
	constructors := map[string]func(string) error{
		"adapterhttp.NewClient": func(u string) error { _, err := adapterhttp.NewClient(u, "tok"); return err },
		"httpx.New":             func(u string) error { _, err := httpx.New("prov", u); return err },
		"client.New":            func(u string) error { _, err := client.New(u, "tok"); return err },
	}
	for name, build := range constructors {
		for _, u := range urls {
			err := build(u)
			if err == nil {
				if name == "httpx.New" && strings.Contains(u, "?") {
					continue // httpx keeps a query on its base URL
				}
				t.Errorf("%s(%q) accepted the endpoint", name, u)
				continue
			}
			if strings.Contains(err.Error(), "pw-9f3k") {
				t.Errorf("%s(%q): %v", name, u, err)
			}
		}
	}
}
