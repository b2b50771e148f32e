package api

import (
	"strings"
	"testing"
)

func TestCheckCredentialsEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"LAB_ADAPTER_TOKEN", true},
		{"_x9", true},
		{"DIFFERENTLYTOKEN", true},
		{"1TOKEN", false},
		{"A-B", false},
		{"A B", false},
		{"DIFFERENTLY_DATABASE_URL", false},
		{"DIFFERENTLY_ADAPTER_TOKEN", false},
		{"differently_database_url", false},
		{"PGPASSWORD", false},
		{"pgpassfile", false},
		{"GPU_POOL_KEY", true},
	} {
		err := CheckCredentialsEnv(c.name)
		if (err == nil) != c.ok {
			t.Errorf("CheckCredentialsEnv(%q) = %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && AsError(err).Code != CodeInvalidRequest {
			t.Errorf("CheckCredentialsEnv(%q): code %s", c.name, AsError(err).Code)
		}
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{"ci-pool": true, "a": true, "a1": true, "CI_Pool": false, "-x": false,
		"x-": false, "": false, string(make([]byte, 64)): false} {
		if ValidName(s) != want {
			t.Errorf("ValidName(%q) = %v", s, !want)
		}
	}
}

func TestEnvAllowlist(t *testing.T) {
	for _, c := range []struct {
		name     string
		patterns []string
		env      string
		ok       bool
	}{
		{"no list: any other variable", nil, "AWS_SECRET_ACCESS_KEY", true},
		{"no list: the daemon's own", nil, "DIFFERENTLY_DATABASE_URL", false},
		{"no list: no variable", nil, "", true},
		{"exact name", []string{"LAB_ADAPTER_TOKEN"}, "LAB_ADAPTER_TOKEN", true},
		{"exact name is not a prefix", []string{"LAB_ADAPTER_TOKEN"}, "LAB_ADAPTER_TOKEN_2", false},
		{"prefix", []string{"DAYTONA_*"}, "DAYTONA_API_KEY", true},
		{"prefix, another variable", []string{"DAYTONA_*"}, "AWS_SECRET_ACCESS_KEY", false},
		{"case matters", []string{"DAYTONA_*"}, "daytona_api_key", false},
		{"suffix", []string{"*_POOL_KEY"}, "GPU_POOL_KEY", true},
		{"inner star", []string{"POOL_*_KEY"}, "POOL_EU_KEY", true},
		{"second entry", []string{"DAYTONA_*", "FREESTYLE_KEY"}, "FREESTYLE_KEY", true},
		{"the list never lets the daemon's own through", []string{"*_URL"}, "DIFFERENTLY_DATABASE_URL", false},
		{"nor the driver's", []string{"*WORD"}, "PGPASSWORD", false},
		{"empty list: nothing", []string{}, "DAYTONA_API_KEY", false},
		{"empty list: no variable is fine", []string{}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := NewEnvAllowlist(c.patterns)
			if err != nil {
				t.Fatal(err)
			}
			if l.Set() != (c.patterns != nil) {
				t.Fatalf("Set() = %v for %#v", l.Set(), c.patterns)
			}
			err = l.Check(c.env)
			if (err == nil) != c.ok {
				t.Fatalf("Check(%q) = %v, want ok %v", c.env, err, c.ok)
			}
			if err != nil {
				if e := AsError(err); e == nil || e.Code != CodeInvalidRequest || !strings.Contains(e.Message, c.env) {
					t.Fatalf("Check(%q): %v does not name the variable as invalid_request", c.env, err)
				}
			}
		})
	}
}

func TestEnvAllowlistEntries(t *testing.T) {
	for _, p := range []string{"", "*", "**", "1KEY", "A-B", "A?", "A[B]", "A/B", "DIFFERENTLY_*", "differently_x", "PG*", "pgpass"} {
		if _, err := NewEnvAllowlist([]string{"DAYTONA_*", p}); err == nil || AsError(err).Code != CodeInvalidRequest {
			t.Errorf("entry %q: %v, want invalid_request", p, err)
		}
	}
	for _, p := range []string{"DAYTONA_*", "*_KEY", "_X", "LAB_ADAPTER_TOKEN"} {
		if err := CheckEnvPattern(p); err != nil {
			t.Errorf("entry %q: %v", p, err)
		}
	}
}
