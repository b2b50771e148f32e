package config_test

import (
	"strings"
	"testing"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/pools"
)

// TestValidateChecksPoolConfig: a pool whose adapter config its adapter would refuse
// is a problem of the file, under the offending key, before the daemon starts.
func TestValidateChecksPoolConfig(t *testing.T) {
	reg := pools.DefaultRegistry(false)
	opts := config.ValidateOptions{KnownAdapters: reg.Kinds(), CheckPoolConfig: reg.CheckConfig}
	const db = "database: {url: x.db}\npools:\n"
	for _, tc := range []struct {
		name, pool, want string
	}{
		{"empty remote", "{name: a, adapter: remote}", `pools[0].config.endpoint: remote config key "endpoint": required`},
		{"unknown key", "{name: a, adapter: remote, config: {endpoint: 'http://127.0.0.1:1', token: x}}", `pools[0].config.token: remote config: unknown key "token"`},
		{"ftp endpoint", "{name: a, adapter: remote, config: {endpoint: 'ftp://plugin.example'}}", `pools[0].config.endpoint: remote config key "endpoint": "ftp://plugin.example" must be an http or https URL`},
		{"string for a number", "{name: a, adapter: remote, config: {endpoint: 'http://127.0.0.1:1', timeoutSeconds: 'ten'}}", `pools[0].config.timeoutSeconds: remote config key "timeoutSeconds": want an integer, got string`},
		{"opensandbox without apiURL", "{name: a, adapter: opensandbox, trust: private, config: {image: ubuntu}}", `pools[0].config.apiURL: opensandbox config key "apiURL"`},
		{"daytona bad scheme", "{name: a, adapter: daytona, config: {apiURL: 'gopher://d.example'}}", `pools[0].config.apiURL: daytona config key "apiURL"`},
		{"freestyle unknown key", "{name: a, adapter: freestyle, config: {domian: x.dev}}", `pools[0].config.domian: freestyle config: unknown key "domian"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(db + "  - " + tc.pool + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate(opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want a problem containing %q", err, tc.want)
			}
		})
	}
	c, err := config.Parse([]byte(db + "  - {name: a, adapter: remote, config: {endpoint: 'https://plugin.example:8443', timeoutSeconds: 30}}\n" +
		"  - {name: b, adapter: daytona}\n  - {name: c, adapter: opensandbox, trust: private, config: {apiURL: 'http://o.example/v1'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(opts); err != nil {
		t.Errorf("good pools: %v", err)
	}
}
