package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/store"
)

const fullExample = `# production config
database:
  url: postgres://differently@db.internal/differently
listen: 0.0.0.0:8700
tls:
  certFile: /etc/differently/tls.crt
  keyFile: /etc/differently/tls.key
scheduler:
  provisionTimeoutSeconds: 300
  maxAttempts: 5
  maxQueued: 500
pools:
  - name: lab-fleet
    adapter: remote
    trust: private          # the plugin fronts our own VMs
    region: lab-1
    maxConcurrency: 20
    maxStarting: 4
    costModel: {cpuHour: 0.01, memoryGiBHour: 0.002}
    config:
      endpoint: https://lab-adapter.internal:8443
      nested: {list: [1, 2.5, x], deep: {on: true}}
    credentials:
      env: LAB_ADAPTER_TOKEN
    features: [exec, files, isolation.microvm]
  - name: remote-b
    adapter: remote
`

var known = []string{"devhost", "fake", "remote"}

// devOnly is what pools.DefaultRegistry(…).DevOnlyKinds returns.
var devOnly = []string{"devhost", "fake"}

func TestParseFullExample(t *testing.T) {
	cfg, err := Parse([]byte(fullExample))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(ValidateOptions{KnownAdapters: known}); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Scheduler{ProvisionTimeoutSeconds: 300, MaxAttempts: 5, ReconcileIntervalSeconds: 30,
		TerminateTimeoutSeconds: 60, MaxQueued: 500, DefaultMaxStarting: 8, ReconcilePassesKept: 200}
	if cfg.Scheduler != want {
		t.Errorf("scheduler = %+v, want %+v (set keys kept, others defaulted)", cfg.Scheduler, want)
	}
	if cfg.Listen != "0.0.0.0:8700" || cfg.TLS.KeyFile != "/etc/differently/tls.key" {
		t.Errorf("top-level settings = %+v", cfg)
	}
	if len(cfg.Pools) != 2 {
		t.Fatalf("pools = %d, want 2", len(cfg.Pools))
	}
	got := cfg.Pools[0].StorePool()
	wantPool := store.Pool{
		Name: "lab-fleet", Adapter: "remote", Trust: api.TrustPrivate, Region: "lab-1",
		MaxConcurrency: 20, MaxStarting: 4,
		CostModel:      store.CostModel{CPUHour: 0.01, MemoryGiBHour: 0.002},
		CredentialsEnv: "LAB_ADAPTER_TOKEN",
		Features:       []string{"exec", "files", "isolation.microvm"},
		Source:         store.PoolFromConfig,
	}
	cfgMap := got.Config
	got.Config = nil
	if !reflect.DeepEqual(got, wantPool) {
		t.Errorf("StorePool = %+v\nwant %+v", got, wantPool)
	}
	if cfgMap["endpoint"] != "https://lab-adapter.internal:8443" {
		t.Errorf("config.endpoint = %v", cfgMap["endpoint"])
	}
	// The stored map is a deep copy: changing it leaves the parsed file alone.
	cfgMap["nested"].(map[string]any)["deep"].(map[string]any)["on"] = false
	if cfg.Pools[0].Config["nested"].(map[string]any)["deep"].(map[string]any)["on"] != true {
		t.Error("StorePool shares nested config maps with the parsed config")
	}
	if tr := cfg.Pools[1].StorePool().Trust; tr != api.TrustPrivate {
		t.Errorf("remote pool without trust got %q, want private", tr)
	}
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("empty file = %+v, want defaults %+v", cfg, Default())
	}
	if cfg.Listen != "127.0.0.1:8700" || cfg.Scheduler.MaxQueued != 10000 || cfg.Scheduler.DefaultMaxStarting != 8 {
		t.Errorf("defaults = %+v", cfg)
	}
}

// Default takes every value from server/defaults, which the packages fall back to
// as well, and loses nothing when it writes a duration as whole seconds.
func TestDefaultIsServerDefaults(t *testing.T) {
	cfg, sec := Default(), func(n int) time.Duration { return time.Duration(n) * time.Second }
	s, f, ev := cfg.Scheduler, cfg.Files, cfg.Events
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"listen", cfg.Listen, defaults.Listen},
		{"scheduler.provisionTimeoutSeconds", sec(s.ProvisionTimeoutSeconds), defaults.ProvisionTimeout},
		{"scheduler.maxAttempts", s.MaxAttempts, defaults.MaxAttempts},
		{"scheduler.reconcileIntervalSeconds", sec(s.ReconcileIntervalSeconds), defaults.ReconcileInterval},
		{"scheduler.terminateTimeoutSeconds", sec(s.TerminateTimeoutSeconds), defaults.TerminateTimeout},
		{"scheduler.maxQueued", s.MaxQueued, defaults.MaxQueued},
		{"scheduler.defaultMaxStarting", s.DefaultMaxStarting, defaults.MaxStarting},
		{"scheduler.reconcilePassesKept", s.ReconcilePassesKept, defaults.ReconcilePassesKept},
		{"files.maxTransfers", f.MaxTransfers, defaults.MaxTransfers},
		{"files.maxProjectTransfers", f.MaxProjectTransfers, defaults.MaxProjectTransfers},
		{"files.largeTransferBytes", f.LargeTransferBytes, int64(defaults.LargeTransferBytes)},
		{"events.keepPerSandbox", ev.KeepPerSandbox, defaults.EventsPerSandbox},
		{"events.keepAfterTerminalSeconds", sec(ev.KeepAfterTerminalSeconds), defaults.EventsAfterTerminal},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v (server/defaults)", tc.key, tc.got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings the error must contain
	}{
		{"unknown top-level key", "listen: a:1\nlistn: b\n",
			[]string{`line 2: unknown key "listn" at top level`, `did you mean "listen"`}},
		{"unknown nested key in a pool", "pools:\n  - name: a\n    adapter: fake\n\n    maxConcurency: 3\n",
			[]string{`line 5: unknown key "maxConcurency" in pools[0]`, `did you mean "maxConcurrency"`}},
		{"unknown key deeper", "pools:\n  - name: a\n    costModel: {cpuHour: 1, gpuHour: 2}\n",
			[]string{`line 3: unknown key "gpuHour" in pools[0].costModel`}},
		{"every unknown key reported", "foo: 1\nscheduler:\n  bar: 2\n",
			[]string{`line 1: unknown key "foo"`, `line 3: unknown key "bar" in scheduler`}},
		{"string for integer", "pools:\n  - name: a\n    maxConcurrency: lots\n",
			[]string{`line 3: pools[0].maxConcurrency: want an integer, got string "lots"`}},
		{"fraction for integer", "scheduler:\n  maxAttempts: 2.5\n",
			[]string{`line 2: scheduler.maxAttempts: want an integer, got number 2.5`}},
		{"string for number", "pools:\n  - name: a\n    costModel: {cpuHour: cheap}\n",
			[]string{`pools[0].costModel.cpuHour: want a number, got string "cheap"`}},
		{"bool for string", "pools:\n  - name: a\n    trust: true\n",
			[]string{`line 3: pools[0].trust: want a string, got boolean true`}},
		{"null for a section", "scheduler:\nlisten: a:1\n", []string{`line 1: scheduler: has no value`}},
		{"null for an integer", "scheduler:\n  maxAttempts: ~\n", []string{`line 2: scheduler.maxAttempts: has no value`}},
		{"list for string", "listen: [a]\n", []string{`line 1: listen: want a string, got a list`}},
		{"scalar for list", "pools: 3\n", []string{`line 1: pools: want a list, got integer 3`}},
		{"scalar for struct", "pools:\n  - name: a\n    credentials: FOO\n",
			[]string{`pools[0].credentials: want a mapping, got string "FOO"`}},
		{"scalar for map", "pools:\n  - name: a\n    config: 3\n", []string{`pools[0].config: want a mapping, got integer 3`}},
		{"duplicate key", "listen: a:1\nlisten: b:2\n", []string{`line 2:`, `"listen"`}},
		{"syntax error", "listen: x\n  bad: :\n", []string{`line 2:`}},
		{"two documents", "listen: a:1\n---\nlisten: b:2\n", []string{`one YAML document`}},
		{"string for e2b.enabled", "e2b:\n  enabled: maybe\n", []string{`line 2: e2b.enabled:`}},
		{"null for e2b.enabled", "e2b:\n  enabled:\n", []string{`line 2: e2b.enabled: has no value`}},
		{"unknown key in e2b", "e2b:\n  enable: false\n", []string{`unknown key "enable" in e2b`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// The E2B front door is on unless the file turns it off.
func TestE2BEnabled(t *testing.T) {
	for yaml, want := range map[string]bool{"": true, "e2b: {}\n": true, "e2b:\n  enabled: false\n": false, "e2b:\n  enabled: true\n": true} {
		cfg, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if cfg.E2B.Enabled != want {
			t.Errorf("%q: e2b.enabled = %v, want %v", yaml, cfg.E2B.Enabled, want)
		}
	}
}

// The console is on unless the file turns it off.
func TestConsoleEnabled(t *testing.T) {
	for yaml, want := range map[string]bool{"": true, "console: {}\n": true, "console:\n  enabled: false\n": false, "console:\n  enabled: true\n": true} {
		cfg, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if cfg.Console.Enabled != want {
			t.Errorf("%q: console.enabled = %v, want %v", yaml, cfg.Console.Enabled, want)
		}
	}
}

func TestLoadNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	src := "database:\n  url: x.db\npools:\n  - name: lab\n    adapter: remote\n    region: r\n    maxConcurency: 3\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	want := path + `:7: unknown key "maxConcurency" in pools[0]`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Load error = %v, want it to contain %q", err, want)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Load of a missing file = %v, want an error naming it", err)
	}
}

func TestApplyEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unset keeps the file", nil, "postgres://file"},
		{"empty keeps the file", map[string]string{EnvDatabaseURL: ""}, "postgres://file"},
		{"set overrides", map[string]string{EnvDatabaseURL: "postgres://env"}, "postgres://env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("database: {url: postgres://file}\n"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.ApplyEnv(func(k string) string { return tt.env[k] })
			if cfg.Database.URL != tt.want {
				t.Errorf("url = %q, want %q", cfg.Database.URL, tt.want)
			}
		})
	}
}

// The example in examples/server must stay a valid config.
func TestExampleConfig(t *testing.T) {
	cfg, err := Load("../../examples/server/differently.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(ValidateOptions{KnownAdapters: []string{"remote"}}); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Pools) != 1 || cfg.Pools[0].Credentials.Env != "LAB_ADAPTER_TOKEN" {
		t.Errorf("pools: %+v", cfg.Pools)
	}
	if l := cfg.CredentialsAllowlist(); !l.Set() || l.Check("DAYTONA_API_KEY") != nil || l.Check("AWS_SECRET_ACCESS_KEY") == nil {
		t.Errorf("credentials allowlist: %v", l.Patterns())
	}
}
