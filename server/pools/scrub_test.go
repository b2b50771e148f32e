package pools

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
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
