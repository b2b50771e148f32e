package e2b

import (
	"context"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// lookup is a SandboxLookup over a map, recording the caller it was asked with.
type lookup struct {
	sbs    map[string]store.Sandbox
	caller sandboxes.Caller
}

func (l *lookup) Sandbox(_ context.Context, c sandboxes.Caller, id string) (store.Sandbox, error) {
	l.caller = c
	sb, ok := l.sbs[id]
	if !ok {
		return store.Sandbox{}, api.Errorf(api.CodeNotFound, "sandbox %s not found", id)
	}
	return sb, nil
}

func TestEnvdVerifier(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	l := &lookup{sbs: map[string]store.Sandbox{"sbx_a": {ID: "sbx_a", Org: "acme", Project: "agents"}}}
	v := EnvdVerifier{Secret: secret, Sandboxes: l}
	tests := []struct {
		name, id, token string
		want            sandboxes.Caller
		code            api.Code
	}{
		{"the sandbox's own token", "sbx_a", AccessToken(secret, "sbx_a"),
			sandboxes.Caller{TokenID: envdTokenID, Org: "acme", Project: "agents"}, ""},
		{"another sandbox's token", "sbx_a", AccessToken(secret, "sbx_b"), sandboxes.Caller{}, api.CodeUnauthenticated},
		{"another secret's token", "sbx_a", AccessToken([]byte("another secret of 32 bytes or more"), "sbx_a"), sandboxes.Caller{}, api.CodeUnauthenticated},
		{"no token", "sbx_a", "", sandboxes.Caller{}, api.CodeUnauthenticated},
		{"a good token for a sandbox that is gone", "sbx_b", AccessToken(secret, "sbx_b"), sandboxes.Caller{}, api.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(t.Context(), tt.id, tt.token)
			if tt.code != "" {
				if api.CodeOf(err) != tt.code {
					t.Fatalf("Verify = %+v, %v; want %s", got, err, tt.code)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Verify = %+v, %v; want %+v", got, err, tt.want)
			}
			// The lookup is the only admin act; what the request does is the project's.
			if !l.caller.Admin || got.Admin {
				t.Fatalf("lookup caller %+v, request caller %+v", l.caller, got)
			}
		})
	}
}
