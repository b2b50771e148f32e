package console

import (
	"testing"
	"time"
)

// Sessions end when idle too long or too old, on sign-out, and past the bound the
// least recently used goes first.
func TestSessions(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		at     time.Duration // when the session is read back
		touch  []time.Duration
		end    bool
		wantOK bool
	}{
		{name: "fresh", at: time.Minute, wantOK: true},
		{name: "idle too long", at: 30 * time.Minute, wantOK: false},
		{name: "kept alive by use", at: 50 * time.Minute, touch: []time.Duration{20 * time.Minute, 40 * time.Minute}, wantOK: true},
		{name: "too old despite use", at: 2*time.Hour + time.Minute,
			touch: []time.Duration{25 * time.Minute, 50 * time.Minute, 75 * time.Minute, 100 * time.Minute}, wantOK: false},
		{name: "signed out", at: time.Minute, end: true, wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSessions(30*time.Minute, 2*time.Hour, 10)
			ses, err := s.start("secret", t0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range tc.touch {
				if _, ok := s.get(ses.id, t0.Add(d)); !ok {
					t.Fatalf("session gone at %v", d)
				}
			}
			if tc.end {
				s.end(ses.id)
			}
			got, ok := s.get(ses.id, t0.Add(tc.at))
			if ok != tc.wantOK {
				t.Fatalf("live = %v, want %v", ok, tc.wantOK)
			}
			if ok && got.secret != "secret" {
				t.Fatalf("secret %q", got.secret)
			}
			if !ok && s.len() != 0 {
				t.Fatalf("an ended session is still held")
			}
		})
	}
}

func TestSessionsBound(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newSessions(time.Hour, 10*time.Hour, 3)
	var ids []string
	for i := range 3 {
		ses, err := s.start("secret", t0.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ses.id)
	}
	// The first is used last, so the second is the least recently used.
	if _, ok := s.get(ids[0], t0.Add(5*time.Minute)); !ok {
		t.Fatal("first session gone")
	}
	if _, err := s.start("secret", t0.Add(6*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s.len() != 3 {
		t.Fatalf("%d sessions, want the bound 3", s.len())
	}
	if _, ok := s.get(ids[1], t0.Add(7*time.Minute)); ok {
		t.Error("the least recently used session survived")
	}
	for _, id := range []string{ids[0], ids[2]} {
		if _, ok := s.get(id, t0.Add(7*time.Minute)); !ok {
			t.Errorf("session %s dropped", id)
		}
	}
}

func TestCSRFCompare(t *testing.T) {
	ses := session{csrf: "abc"}
	for posted, want := range map[string]bool{"abc": true, "": false, "ab": false, "abcd": false, "ABC": false} {
		if got := ses.validCSRF(posted); got != want {
			t.Errorf("validCSRF(%q) = %v, want %v", posted, got, want)
		}
	}
	if (session{}).validCSRF("") {
		t.Error("an empty token matched a session without one")
	}
}

func TestReadTTL(t *testing.T) {
	for in, want := range map[string]int64{"3600": 3600, "90m": 5400, " 2h ": 7200, "0": 0} {
		got, err := readTTL(in)
		if err != nil || got != want {
			t.Errorf("readTTL(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5s", "soon", "999999999999"} {
		if _, err := readTTL(bad); err == nil {
			t.Errorf("readTTL(%q) accepted", bad)
		}
	}
}
