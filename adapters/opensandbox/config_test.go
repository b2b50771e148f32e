package opensandbox

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(map[string]any{
		"apiURL": "http://os:8080/v1", "image": "ubuntu", "runtime": "docker", "ports": "signed",
		"portURLSeconds": json.Number("600"), "egress": "none", "useServerProxy": true, "lineEndings": "crlf",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.PortURLSeconds != 600 || c.Isolation != "container" || !c.UseServerProxy || c.LineEndings != "crlf" {
		t.Fatalf("config %+v", c)
	}
	for _, n := range []any{600, float64(600), int64(600)} {
		if c, err := ParseConfig(map[string]any{"apiURL": "http://x", "portURLSeconds": n}); err != nil || c.PortURLSeconds != 600 {
			t.Errorf("portURLSeconds %T: %v", n, err)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := map[string]map[string]any{
		"colour":         {"apiURL": "http://x", "colour": "blue"},
		"apiURL":         {"image": "x"},
		"isolation":      {"apiURL": "http://x", "isolation": "vm"},
		"portURLSeconds": {"apiURL": "http://x", "portURLSeconds": 1.5},
		"features":       {"apiURL": "http://x", "features": []any{"lifecycle.pause-resume"}},
		"egressAllow":    {"apiURL": "http://x", "egress": "allowlist"},
		"runtime":        {"apiURL": "http://x", "runtime": 3},
	}
	for key, cfg := range cases {
		_, err := ParseConfig(cfg)
		if !api.IsCode(err, api.CodeInvalidRequest) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want invalid_request naming the key", key, err)
		}
	}
	// apiURL has no default here: an empty one is refused, not taken as unset.
	if _, err := ParseConfig(map[string]any{"apiURL": ""}); !api.IsCode(err, api.CodeInvalidRequest) || !strings.Contains(err.Error(), "apiURL") {
		t.Errorf("empty apiURL: %v, want invalid_request naming it", err)
	}
	if _, err := ParseConfig(map[string]any{"apiURL": "http://x", "features": []any{"nope"}}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("unknown feature: %v", err)
	}
	if _, err := FromConfig(map[string]any{"apiURL": "ftp://x"}, "k"); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("ftp apiURL: %v", err)
	}
}
