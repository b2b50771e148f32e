package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// session is one signed-in browser. The token secret stays here, on the server: the
// browser holds only the session's random ID, in an HttpOnly cookie. Every request
// checks the secret again (Options.Authenticate), so a token deleted through the API
// ends its sessions at their next request.
type session struct {
	id     string
	secret string
	// csrf is the value every form of this session posts back (csrfField).
	csrf    string
	created time.Time
	seen    time.Time
}

// sessions is this replica's signed-in browsers. It is bounded: past max, signing in
// drops the expired sessions, then the least recently used one.
type sessions struct {
	idle, maxAge time.Duration
	max          int

	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(idle, maxAge time.Duration, max int) *sessions {
	return &sessions{idle: idle, maxAge: maxAge, max: max, byID: map[string]*session{}}
}

// randomID is 32 random bytes, URL-safe: a session ID or a CSRF token.
func randomID() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// start makes a session for secret.
func (s *sessions) start(secret string, now time.Time) (session, error) {
	id, err := randomID()
	if err != nil {
		return session{}, err
	}
	csrf, err := randomID()
	if err != nil {
		return session{}, err
	}
	ses := &session{id: id, secret: secret, csrf: csrf, created: now, seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= s.max {
		var oldest *session
		for k, v := range s.byID {
			if s.expired(v, now) {
				delete(s.byID, k)
				continue
			}
			if oldest == nil || v.seen.Before(oldest.seen) {
				oldest = v
			}
		}
		if len(s.byID) >= s.max && oldest != nil {
			delete(s.byID, oldest.id)
		}
	}
	s.byID[id] = ses
	return *ses, nil
}

func (s *sessions) expired(ses *session, now time.Time) bool {
	return now.Sub(ses.seen) >= s.idle || now.Sub(ses.created) >= s.maxAge
}

// get returns the live session id names and marks it used; an expired one is
// dropped.
func (s *sessions) get(id string, now time.Time) (session, bool) {
	if id == "" {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ses, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	if s.expired(ses, now) {
		delete(s.byID, id)
		return session{}, false
	}
	ses.seen = now
	return *ses, true
}

// end drops a session (sign-out, or a token that no longer authenticates).
func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}

// len is how many sessions are held, expired ones included until they are seen.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// validCSRF compares a posted CSRF token with the session's in constant time.
func (ses session) validCSRF(posted string) bool {
	return posted != "" && subtle.ConstantTimeCompare([]byte(posted), []byte(ses.csrf)) == 1
}
