package ndjson

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
)

// BenchmarkStream streams output in 256 KiB pieces (what devhost reads at a time)
// through a loopback HTTP server, as NDJSON and as frames, to a reader that makes a
// string of each piece as a client does.
func BenchmarkStream(b *testing.B) {
	const piece, pieces = 256 << 10, 64
	data := make([]byte, piece)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	for _, framed := range []bool{false, true} {
		b.Run("framed="+strconv.FormatBool(framed), func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				nw := NewExecWriter(w)
				if framed {
					nw = NewFramedExecWriter(w)
				}
				for range pieces {
					if err := nw.EmitBytes(api.StreamStdout, data); err != nil {
						return
					}
				}
				nw.Finish(api.ExitEvent(0, false), nil, noError, describe)
			}))
			defer srv.Close()
			b.SetBytes(piece * pieces)
			for b.Loop() {
				resp, err := http.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				var got int
				if framed {
					fr := frames.NewReader(resp.Body)
					for {
						k, p, err := fr.Next()
						if err != nil {
							b.Fatal(err)
						}
						if k == frames.Final {
							break
						}
						got += len(string(p))
					}
				} else {
					sc := bufio.NewScanner(resp.Body)
					sc.Buffer(make([]byte, 0, 64<<10), api.MaxStreamLineBytes+1)
					var dec Decoder
					for sc.Scan() {
						ev, err := dec.Decode(sc.Bytes())
						if err != nil {
							b.Fatal(err)
						}
						got += len(ev.Data)
					}
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got != piece*pieces {
					b.Fatalf("read %d bytes", got)
				}
			}
		})
	}
}
