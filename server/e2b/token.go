package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// AccessToken is the envdAccessToken of a sandbox: an HMAC-SHA256 of its ID under
// the daemon's secret, base64url. E2B's SDKs send it back as X-Access-Token on every
// envd request, and the envd front door checks it with VerifyAccessToken without a
// lookup: it proves that whoever holds it was given the sandbox by this control
// plane (a create, get or connect with a valid API key), and it names only that
// sandbox. It carries no expiry: it stops working when the sandbox ends (envd then
// answers as for an unknown sandbox) or when the secret changes.
func AccessToken(secret []byte, sandboxID string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("differently-e2b-envd\x00"))
	m.Write([]byte(sandboxID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// VerifyAccessToken reports whether token is sandboxID's AccessToken under secret,
// in constant time.
func VerifyAccessToken(secret []byte, sandboxID, token string) bool {
	if len(secret) == 0 || sandboxID == "" || token == "" {
		return false
	}
	return hmac.Equal([]byte(AccessToken(secret, sandboxID)), []byte(token))
}

// SandboxLookup finds a sandbox for the envd verifier; *sandboxes.Service is one.
type SandboxLookup interface {
	Sandbox(ctx context.Context, c sandboxes.Caller, id string) (store.Sandbox, error)
}

// EnvdVerifier checks the X-Access-Token of envd requests (server/e2b/envd's
// Verifier). A valid token proves the sandbox was handed out by a caller of its
// project, so the request acts as that project: it reaches that sandbox and no other.
type EnvdVerifier struct {
	Secret    []byte
	Sandboxes SandboxLookup
}

// envdTokenID names envd requests' caller in events and logs; they carry no API
// key of their own.
const envdTokenID = "e2b-envd"

// Verify implements envd.Verifier. A bad token is unauthenticated; a good one for a
// sandbox that no longer exists is not_found, which envd answers as a sandbox that
// is not running.
func (v EnvdVerifier) Verify(ctx context.Context, sandboxID, token string) (sandboxes.Caller, error) {
	if !VerifyAccessToken(v.Secret, sandboxID, token) {
		return sandboxes.Caller{}, api.Errorf(api.CodeUnauthenticated, "X-Access-Token is not this sandbox's envdAccessToken")
	}
	sb, err := v.Sandboxes.Sandbox(ctx, sandboxes.Caller{Admin: true, TokenID: envdTokenID}, sandboxID)
	if err != nil {
		return sandboxes.Caller{}, err
	}
	return sandboxes.Caller{TokenID: envdTokenID, Org: sb.Org, Project: sb.Project}, nil
}
