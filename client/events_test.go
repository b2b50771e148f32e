package client_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/client"
)

// A sandbox's history through the client: created, placed and running, in order,
// paged and followed.
func TestEvents(t *testing.T) {
	dd := startDaemon(t)
	c := dd.client(t)
	ctx := testCtx(t)
	sb, err := c.CreateSandboxAndWait(ctx, client.SandboxCreate{Placement: &client.Placement{AllowedPools: &[]string{"fake"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.ListSandboxEvents(ctx, sb.Id, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []client.EventType
	for _, e := range page.Items {
		got = append(got, e.Type)
	}
	want := []client.EventType{client.EventCreated, client.EventPlaced, client.EventRunning}
	if !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	limit := 1
	one, err := c.ListEvents(ctx, &client.ListEventsParams{Sandbox: &sb.Id, Limit: &limit})
	if err != nil || len(one.Items) != 1 || one.NextCursor == "" {
		t.Fatalf("a page of one: %+v, %v", one, err)
	}
}

// FollowEvents reconnects from the cursor of the last event it yielded when the
// stream is cut, so the caller sees every event once.
func TestFollowEventsReconnects(t *testing.T) {
	dd := startDaemon(t)
	target, err := url.Parse(dd.url)
	if err != nil {
		t.Fatal(err)
	}
	// cutter forwards to the daemon but ends the first follow answer after one line.
	var follows atomic.Int32
	cutter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if r.URL.Query().Get("follow") == "true" && follows.Add(1) == 1 {
			line, _ := bufio.NewReader(resp.Body).ReadBytes('\n')
			_, _ = w.Write(line)
			return
		}
		rc := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				_ = rc.Flush()
			}
			if err == io.EOF || err != nil {
				return
			}
		}
	}))
	t.Cleanup(cutter.Close)

	ctx := testCtx(t)
	direct := dd.client(t)
	var ids []string
	for range 2 {
		sb, err := direct.CreateSandboxAndWait(ctx, client.SandboxCreate{Placement: &client.Placement{AllowedPools: &[]string{"fake"}}}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.Id)
	}
	c, err := client.New(cutter.URL, dd.token)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for e, err := range c.FollowEvents(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e.SandboxId+" "+string(e.Type))
		if len(seen) == 6 {
			break
		}
	}
	var want []string
	for _, id := range ids {
		for _, typ := range []string{"created", "placed", "running"} {
			want = append(want, id+" "+typ)
		}
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("followed %v\nwant %v", seen, want)
	}
	if n := follows.Load(); n < 2 {
		t.Fatalf("%d follow requests: the cut stream was not reconnected", n)
	}
}
