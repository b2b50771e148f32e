// Package tokens makes API token secrets and the hashes they are stored and looked
// up by. The API authenticates with it and the daemon mints its first admin token
// with it, so both agree on the format without one importing the other.
package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// Prefix starts every token secret, so that a leaked one is recognisable to secret
// scanners and to people.
const Prefix = "dly_"

// New makes a token secret: Prefix and 32 random bytes, base64url.
func New() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Hash is how a secret is stored and looked up: only its SHA-256, so the database
// never holds a usable token.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}
