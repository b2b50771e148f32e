package api

import "testing"

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
