package store

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
)

func TestEventCursorRoundTrip(t *testing.T) {
	for _, c := range []EventCursor{{}, {Seq: 7}, {Txid: 1 << 40, Seq: 3}, {Txid: 9}} {
		got, err := DecodeEventCursor(c.Encode())
		if err != nil || got != c {
			t.Errorf("%+v: decoded %+v, %v", c, got, err)
		}
	}
	if c, err := DecodeEventCursor(""); err != nil || c != (EventCursor{}) {
		t.Errorf(`"": %+v, %v`, c, err)
	}
}

func TestEventCursorMalformed(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, s := range []string{"%%", "aWQ6eA", enc("[]"), enc(`{"s":-2}`), enc(`{"x":-1,"s":1}`),
		enc(`{"s":1,"y":1}`), enc(`{"s":1} {}`), enc(`{"s":1.5}`)} {
		if _, err := DecodeEventCursor(s); api.CodeOf(err) != api.CodeInvalidRequest {
			t.Errorf("%q: %v, want invalid_request", s, err)
		}
	}
}

func TestEventCursorLess(t *testing.T) {
	for _, tc := range []struct {
		a, b EventCursor
		want bool
	}{
		{EventCursor{Txid: 1, Seq: 9}, EventCursor{Txid: 2}, true},
		{EventCursor{Txid: 2}, EventCursor{Txid: 1, Seq: 9}, false},
		{EventCursor{Seq: 1}, EventCursor{Seq: 2}, true},
		{EventCursor{Seq: 2}, EventCursor{Seq: 2}, false},
	} {
		if got := tc.a.Less(tc.b); got != tc.want {
			t.Errorf("%+v < %+v = %v", tc.a, tc.b, got)
		}
	}
}

// PendingEvents stamps a copy: the sandbox's pending list is left as it was.
func TestPendingEvents(t *testing.T) {
	if PendingEvents(Sandbox{ID: "sbx_1"}, time.Now()) != nil {
		t.Fatal("events of a sandbox without pending ones")
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 1500, time.FixedZone("x", 3600))
	sb := Sandbox{ID: "sbx_1", Org: "o", Project: "p",
		Pending: []Event{{Seq: 4, SandboxID: "other", Type: EventFailed, To: StateFailed, Message: "a\x00b"}}}
	got := PendingEvents(sb, at)
	want := Event{SandboxID: "sbx_1", Org: "o", Project: "p", At: Timestamp(at), Type: EventFailed,
		To: StateFailed, Message: "a\uFFFDb"}
	if len(got) != 1 || got[0].At != want.At || got[0].Message != want.Message || got[0].Seq != 0 ||
		got[0].SandboxID != want.SandboxID || got[0].Org != "o" || got[0].Project != "p" {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if sb.Pending[0].SandboxID != "other" || sb.Pending[0].Message != "a\x00b" {
		t.Fatalf("the sandbox's pending list changed: %+v", sb.Pending)
	}
}
