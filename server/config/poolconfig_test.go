package config_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/pools"
)

// TestValidateChecksPoolConfig: a pool whose adapter config its adapter would refuse
// is a problem of the file, under the offending key, before the daemon starts.
func TestValidateChecksPoolConfig(t *testing.T) {
	reg := pools.DefaultRegistry(false)
	opts := config.ValidateOptions{KnownAdapters: reg.Kinds(), DevOnlyAdapters: reg.DevOnlyKinds(), CheckPoolConfig: reg.CheckConfig}
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

// TestEndpointPolicy: a production daemon denies link-local endpoints unless the
// file lists its own networks; a development daemon denies none; bad entries are
// problems naming the entry.
func TestEndpointPolicy(t *testing.T) {
	metadata := netip.MustParseAddr("169.254.169.254")
	c := config.Default()
	for _, a := range []netip.Addr{metadata, netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")} {
		if c.EndpointPolicy(false).CheckAddr(a) == nil {
			t.Errorf("production default allows the metadata address %s", a)
		}
	}
	if c.EndpointPolicy(true).Active() {
		t.Error("development default refuses something")
	}
	c, err := config.Parse([]byte("database: {url: x.db}\npoolEndpoints:\n  allowedNetworks: [10.0.0.0/8, 169.254.0.0/16]\n  deniedNetworks: [10.9.0.0/16]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(config.ValidateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := c.EndpointPolicy(false)
	for addr, ok := range map[string]bool{"10.1.1.1": true, "10.9.1.1": false, "192.168.1.1": false, "169.254.169.254": true} {
		if err := p.CheckAddr(netip.MustParseAddr(addr)); ok != (err == nil) {
			t.Errorf("%s: %v, want allowed %v", addr, err, ok)
		}
	}
	c, err = config.Parse([]byte("database: {url: x.db}\npoolEndpoints: {allowedNetworks: [10.0.0.0/33], deniedNetworks: [metadata]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate(config.ValidateOptions{})
	for _, want := range []string{"poolEndpoints.allowedNetworks[0]: \"10.0.0.0/33\"", "poolEndpoints.deniedNetworks[0]: \"metadata\""} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
	// An allowed list of bad entries allows nothing, not everything.
	if c.EndpointPolicy(false).CheckAddr(netip.MustParseAddr("10.0.0.1")) == nil {
		t.Error("an allowed list of bad entries allowed an address")
	}
}
