package e2b

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
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
