package pools

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/internal/redact"
	"github.com/different-ai/differently/server/store"
)

// echoing fails its probe quoting its key without the last four characters and in
// base64, as a backend echoing a request might.
type echoing struct {
	adapters.ExecutionAdapter
	secret string
}

func (e *echoing) Health(context.Context) error {
	return adapters.Unavailable("key %s**** refused (Basic %s)", e.secret[:len(e.secret)-4],
		base64.StdEncoding.EncodeToString([]byte("user:"+e.secret)))
}

// TestLastErrorScrubsPiecesOfTheKey: a pool's lastError, from a probe or a mark,
// holds neither a prefix of its key nor the key's base64.
func TestLastErrorScrubsPiecesOfTheKey(t *testing.T) {
	const secret = "pool-key-7f3a9c2e5b81d046"
	reg := NewRegistry(false)
	reg.Register("echoing", func(_ context.Context, _ store.Pool, c Credentials) (adapters.ExecutionAdapter, error) {
		return &echoing{fake.New(fake.Config{}), c.Secret()}, nil
	}, false)
	e := newEnv(t, reg, map[string]string{"ECHO_KEY": secret})
	e.create(t, store.Pool{Name: "echo", Adapter: "echoing", CredentialsEnv: "ECHO_KEY"})
	e.refresh(t)
	leaks := []string{secret[:12], secret[len(secret)-12 : len(secret)-4], base64.RawStdEncoding.EncodeToString([]byte(secret))[:12]}
	check := func(what string) {
		t.Helper()
		v := e.view(t, "echo")
		if !strings.Contains(v.LastError, "[redacted]") {
			t.Errorf("%s: lastError %q shows no redaction", what, v.LastError)
		}
		for _, l := range leaks {
			if strings.Contains(v.LastError, l) {
				t.Errorf("%s: lastError %q holds %q", what, v.LastError, l)
			}
		}
	}
	check("probe")
	e.m.MarkUnhealthy("echo", errors.New("create said "+secret[:len(secret)-4]+" and "+
		base64.URLEncoding.EncodeToString([]byte(secret))))
	check("mark")
}

// quoting fails its probe quoting its key in one escaped form, as a backend that
// echoes a request body or URL might.
type quoting struct {
	adapters.ExecutionAdapter
	said string
}

func (q *quoting) Health(context.Context) error {
	return adapters.Unavailable("backend answered 401: %s", q.said)
}

// TestLastErrorScrubsEscapedKey: a probe error that quotes the pool's key JSON- or
// URL-escaped, or in hex, keeps no piece of that form in the pool's lastError. The
// key holds characters each escaping writes differently.
func TestLastErrorScrubsEscapedKey(t *testing.T) {
	const secret = `k3y/p&ss<w0rd>+"t@il"`
	goJSON, err := json.Marshal(secret)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// escaped is the key as the backend writes it; format places it in its answer.
		escaped, format string
	}{
		{"json", strings.Trim(string(goJSON), `"`), `{"token":"%s"}`},
		{"json escaped solidus", `k3y\/p&ss<w0rd>+\"t@il\"`, `{"token":"%s"}`},
		{"query escaped", url.QueryEscape(secret), "GET /v1/login?token=%s"},
		{"query escaped lower case", strings.ToLower(url.QueryEscape(secret)), "GET /v1/login?token=%s&x=1"},
		{"path escaped", url.PathEscape(secret), "GET /v1/keys/%s/usage"},
		{"hex", hex.EncodeToString([]byte(secret)), "key %s refused"},
	}
	pool := func(i int) string { return "p" + strconv.Itoa(i) }
	reg := NewRegistry(false)
	for _, tt := range tests {
		said := fmt.Sprintf(tt.format, tt.escaped)
		reg.Register("quoting-"+tt.name, func(_ context.Context, _ store.Pool, _ Credentials) (adapters.ExecutionAdapter, error) {
			return &quoting{fake.New(fake.Config{}), said}, nil
		}, false)
	}
	e := newEnv(t, reg, map[string]string{"ECHO_KEY": secret})
	for i, tt := range tests {
		e.create(t, store.Pool{Name: pool(i), Adapter: "quoting-" + tt.name, CredentialsEnv: "ECHO_KEY"})
	}
	e.refresh(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.escaped == secret {
				t.Fatalf("the case does not escape the key")
			}
			v := e.view(t, pool(i))
			if v.Healthy || !strings.Contains(v.LastError, "backend answered 401") || !strings.Contains(v.LastError, redact.Marker) {
				t.Fatalf("healthy %v, lastError %q; want the probe error with the key redacted", v.Healthy, v.LastError)
			}
			for k := 0; k+redact.MinPartial <= len(tt.escaped); k++ {
				if piece := tt.escaped[k : k+redact.MinPartial]; strings.Contains(v.LastError, piece) {
					t.Errorf("lastError %q holds %q of the escaped key", v.LastError, piece)
				}
			}
		})
	}
}
