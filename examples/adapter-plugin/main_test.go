package main

import (
	"net/http/httptest"
	"testing"

	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/conformance"
)

// The example passes the conformance suite in process and, served by
// adapterhttp.Handler on a loopback port, over the protocol as the daemon's remote
// pools reach it; the package's tests also keep it building against the real
// packages.
func TestLabConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite")
	}
	lab, err := newLab(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("in-process", func(t *testing.T) {
		conformance.Test(t, lab, conformance.Options{})
	})
	t.Run("http", func(t *testing.T) {
		const token = "lab-test-token"
		srv := httptest.NewServer(adapterhttp.Handler(lab, token))
		defer srv.Close()
		conformance.TestHTTP(t, srv.URL, token, conformance.Options{})
		client, err := adapterhttp.NewClient(srv.URL, token)
		if err != nil {
			t.Fatal(err)
		}
		// Info does no I/O: the client answers it from the last /info it fetched.
		if err := client.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		conformance.Test(t, client, conformance.Options{})
	})
}
