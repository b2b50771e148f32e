package tokens_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/different-ai/differently/server/tokens"
)

func TestNewAndHash(t *testing.T) {
	a, err := tokens.New()
	if err != nil {
		t.Fatal(err)
	}
	b, err := tokens.New()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || !strings.HasPrefix(a, tokens.Prefix) || len(a) != len(tokens.Prefix)+43 {
		t.Fatalf("secrets %q and %q", a, b)
	}
	if h := tokens.Hash(a); len(h) != 32 || !bytes.Equal(h, tokens.Hash(a)) || bytes.Equal(h, tokens.Hash(b)) {
		t.Fatalf("hash %x", h)
	}
	if bytes.Contains(tokens.Hash(a), []byte(a)) {
		t.Fatal("the hash holds the secret")
	}
}
