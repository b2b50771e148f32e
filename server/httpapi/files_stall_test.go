package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
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

// stallFS serves /endless as a file of api.MaxFileBytes and says when the handler
// closes it; other paths are the fake's.
type stallFS struct {
	*fake.Adapter
	closed chan struct{}
}

func (s stallFS) OpenFile(ctx context.Context, ref, p string) (io.ReadCloser, int64, error) {
	if p != "/endless" {
		return s.Adapter.OpenFile(ctx, ref, p)
	}
	return closeSignal{Reader: io.LimitReader(zeros{}, api.MaxFileBytes), closed: s.closed}, api.MaxFileBytes, nil
}

type closeSignal struct {
	io.Reader
	closed chan struct{}
}

func (c closeSignal) Close() error {
	close(c.closed)
	return nil
}

// TestStalledDownloadFreesItsSlot: a client that reads a download's status line and
// then nothing more does not keep the transfer slot: once it has taken nothing for
// the stall timeout, the daemon closes the connection and the adapter's reader, and
// another project's large download finds the slot free.
func TestStalledDownloadFreesItsSlot(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) {
			o.MaxTransfers, o.MaxProjectTransfers, o.LargeTransferBytes = 1, 1, 1000
			o.TransferStallTimeout = 100 * time.Millisecond
		})
		fs := stallFS{Adapter: fake.New(fake.Config{}), closed: make(chan struct{})}
		e.addPool("stall", fs)
		tokA, tokB := e.projectToken("acme", "a"), e.projectToken("acme", "b")
		sbA, sbB := e.running(tokA, "stall"), e.running(tokB, "stall")
		other := strings.Repeat("x", 5000)
		e.do(tokB, "PUT", "/v1/sandboxes/"+sbB.ID+"/files/content?path=/other", other).want(t, http.StatusNoContent)

		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A small receive window, so that the daemon's writes block sooner.
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(conn, "GET /v1/sandboxes/%s/files/content?path=/endless HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", sbA.ID, tokA)
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.Contains(line, "200") {
			t.Fatalf("status line %q: %v", line, err)
		}
		// The client reads nothing more. A guard against a hang, not a wait for
		// state: the reader is closed once the stall timeout has passed.
		select {
		case <-fs.closed:
		case <-time.After(30 * time.Second):
			t.Fatal("a download whose client stopped reading still holds the adapter's reader")
		}
		got := e.do(tokB, "GET", "/v1/sandboxes/"+sbB.ID+"/files/content?path=/other", nil).want(t, http.StatusOK)
		if string(got.body) != other {
			t.Fatalf("downloaded %d bytes, want %d", len(got.body), len(other))
		}
	})
}

// wholeFS is a fake whose files go over whole: no adapters.FileStreamer.
type wholeFS struct {
	adapters.ExecutionAdapter
	adapters.FileSystem
}

// TestStalledUploadFails: an upload whose body stops coming fails once it has
// brought nothing for the stall timeout, not at the end of the upload timeout sized
// for the largest file; its slot is free again. Both for an adapter that takes the
// body as it comes and for one that takes it whole.
func TestStalledUploadFails(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) {
			o.MaxTransfers, o.MaxProjectTransfers, o.LargeTransferBytes = 1, 1, 1000
			o.TransferStallTimeout = 100 * time.Millisecond
		})
		fa := fake.New(fake.Config{})
		e.addPool("streamed", fa)
		e.addPool("whole", wholeFS{ExecutionAdapter: fa, FileSystem: fa})
		for _, pool := range []string{"streamed", "whole"} {
			sb := e.running(e.admin, pool)
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A guard against a hang, not a timing: without the stall bound, the
			// answer came after the upload timeout of ten minutes.
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(conn, "PUT /v1/sandboxes/%s/files/content?path=/f HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 5000\r\n\r\nten bytes!",
				sb.ID, e.admin)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("%s: %v", pool, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s: status %d, want 400", pool, resp.StatusCode)
			}
			e.do(e.admin, "PUT", "/v1/sandboxes/"+sb.ID+"/files/content?path=/g", strings.Repeat("x", 5000)).
				want(t, http.StatusNoContent)
		}
	})
}
