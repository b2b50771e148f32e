package preflight

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/store/open"
)

const (
	pluginToken = "plugin-secret-token-4711"
	dbPassword  = "db-password-0815"
)

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// find returns the findings about subject.
func find(fs []Finding, subject string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Subject == subject {
			out = append(out, f)
		}
	}
	return out
}

func TestRun(t *testing.T) {
	plugin := httptest.NewServer(adapterhttp.Handler(fake.New(fake.Config{}), pluginToken))
	t.Cleanup(plugin.Close)
	dbPath := filepath.Join(t.TempDir(), "differently.db")
	vars := map[string]string{
		"PLUGIN_TOKEN": pluginToken,
		// A database url from the environment, holding a password, overrides the file's.
		config.EnvDatabaseURL: "sqlite://" + dbPath,
	}
	remote := fmt.Sprintf("  - name: lab\n    adapter: remote\n    config: {endpoint: %q}\n    credentials: {env: PLUGIN_TOKEN}\n", plugin.URL)

	tests := []struct {
		name   string
		yaml   string
		dev    bool
		vars   map[string]string
		errors map[string]string // subject -> substring of its error finding
		oks    []string          // subjects with an ok finding
	}{
		{
			name: "all good", dev: true,
			yaml: "database: {url: ignored.db}\npools:\n" + remote + "  - {name: f, adapter: fake}\n",
			oks:  []string{"config", "database", "pool lab", "pool f"},
		},
		{
			name: "fake with a health error", dev: true,
			yaml:   "pools:\n  - {name: f, adapter: fake, config: {healthError: true}}\n",
			errors: map[string]string{"pool f": "health: fake: injected health failure"},
			oks:    []string{"config", "database"},
		},
		{
			name:   "missing credential variable",
			yaml:   "pools:\n" + remote + "  - {name: other, adapter: remote, config: {endpoint: 'http://x'}, credentials: {env: OTHER_TOKEN}}\n",
			errors: map[string]string{"pool other": "credentials variable OTHER_TOKEN is not set or empty"},
			oks:    []string{"pool lab"},
		},
		{
			name:   "bad database url",
			yaml:   "database: {url: 'postgress://db/x'}\n",
			vars:   map[string]string{config.EnvDatabaseURL: ""},
			errors: map[string]string{"database": "unsupported database url scheme"},
		},
		{
			name:   "database password never printed",
			yaml:   "database: {url: x}\n",
			vars:   map[string]string{config.EnvDatabaseURL: "postgres://me:" + dbPassword + "@127.0.0.1:1/db?connect_timeout=1"},
			errors: map[string]string{"database": "cannot open"},
		},
		{
			name: "config problems name the pool",
			yaml: "pools:\n  - {name: d, adapter: devhost, config: {root: /tmp/x}}\n  - {name: o, adapter: firecracker}\n",
			errors: map[string]string{
				"pool d": "pools[0].adapter: adapter devhost is only allowed in development mode (--dev)",
				"pool o": `adapter kind "firecracker" is not in this build`,
			},
		},
		{
			name:   "unreadable TLS files",
			yaml:   "tls: {certFile: /nonexistent/tls.crt, keyFile: /nonexistent/tls.key}\n",
			errors: map[string]string{"tls": "certFile: cannot read /nonexistent/tls.crt"},
		},
		{
			name: "remote adapter with a bad config", dev: true,
			yaml:   "pools:\n  - {name: r, adapter: remote, config: {endpont: 'http://x'}}\n",
			errors: map[string]string{"pool r": `unknown key "endpont"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range vars {
				env[k] = v
			}
			for k, v := range tt.vars {
				env[k] = v
			}
			opened := false
			fs := Run(t.Context(), parse(t, tt.yaml), Options{
				Dev:    tt.dev,
				Getenv: func(k string) string { return env[k] },
				SchemaVersion: func(ctx context.Context, url string) (int, int, error) {
					opened = true
					return open.SchemaVersion(ctx, url)
				},
			})
			report := ""
			for _, f := range fs {
				report += f.String() + "\n"
			}
			if Failed(fs) != (len(tt.errors) > 0) {
				t.Errorf("Failed = %v, want %v:\n%s", Failed(fs), len(tt.errors) > 0, report)
			}
			for subject, want := range tt.errors {
				got := find(fs, subject)
				if len(got) == 0 || got[0].Level != LevelError || !strings.Contains(got[0].Message, want) {
					t.Errorf("%s: findings %v, want an error containing %q\n%s", subject, got, want, report)
				}
			}
			for _, subject := range tt.oks {
				if got := find(fs, subject); len(got) == 0 || got[len(got)-1].Level != LevelOK {
					t.Errorf("%s: findings %v, want ok\n%s", subject, got, report)
				}
			}
			if strings.Count(report, "\n") != len(fs) {
				t.Errorf("a finding spans several lines:\n%s", report)
			}
			for _, secret := range []string{pluginToken, dbPassword} {
				if strings.Contains(report, secret) {
					t.Errorf("the report contains a secret:\n%s", report)
				}
			}
			if _, ok := tt.errors["database"]; !ok && !opened && env[config.EnvDatabaseURL] != "" {
				t.Error("the database was never opened")
			}
		})
	}
}

// A driver that quotes the url it was given must not leak the password in it.
func TestDatabasePasswordRedacted(t *testing.T) {
	dbURL := "postgres://me:" + dbPassword + "@db.internal/differently"
	fs := Run(t.Context(), parse(t, "database: {url: '"+dbURL+"'}\n"), Options{
		Getenv: func(string) string { return "" },
		SchemaVersion: func(_ context.Context, url string) (int, int, error) {
			return 0, 0, fmt.Errorf("cannot reach %s\n\tafter 3 attempts", url)
		},
	})
	got := find(fs, "database")
	want := "cannot open: cannot reach postgres://me:[redacted]@db.internal/differently after 3 attempts"
	if len(got) != 1 || got[0].Message != want {
		t.Errorf("database findings = %v, want one with %q", got, want)
	}
}

func TestFindingString(t *testing.T) {
	f := Finding{Level: LevelError, Subject: "pool lab", Message: "health: down"}
	if got := f.String(); got != "error pool lab: health: down" {
		t.Errorf("String = %q", got)
	}
	if Failed([]Finding{{Level: LevelOK}}) || !Failed([]Finding{{Level: LevelOK}, f}) {
		t.Error("Failed")
	}
}

// A pool naming a variable off the operator's allowlist is reported, naming the
// variable, and neither the variable is read nor the pool's backend called, so its
// value goes nowhere; a pool on the list is checked as usual.
func TestCredentialsOffTheAllowlist(t *testing.T) {
	const awsSecret = "aws-secret-value-1234"
	plugin := httptest.NewServer(adapterhttp.Handler(fake.New(fake.Config{}), pluginToken))
	t.Cleanup(plugin.Close)
	var called atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		called.Store(true)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(elsewhere.Close)
	yaml := fmt.Sprintf("poolCredentials: {allowedEnv: [PLUGIN_*]}\npools:\n"+
		"  - {name: lab, adapter: remote, config: {endpoint: %q}, credentials: {env: PLUGIN_TOKEN}}\n"+
		"  - {name: cloud, adapter: remote, config: {endpoint: %q}, credentials: {env: AWS_SECRET_ACCESS_KEY}}\n",
		plugin.URL, elsewhere.URL)
	var mu sync.Mutex
	var read []string
	vars := map[string]string{"PLUGIN_TOKEN": pluginToken, "AWS_SECRET_ACCESS_KEY": awsSecret,
		config.EnvDatabaseURL: "sqlite://" + filepath.Join(t.TempDir(), "differently.db")}
	fs := Run(t.Context(), parse(t, yaml), Options{Getenv: func(k string) string {
		mu.Lock()
		defer mu.Unlock()
		read = append(read, k)
		return vars[k]
	}})
	report := ""
	for _, f := range fs {
		report += f.String() + "\n"
	}
	if got := find(fs, "pool cloud"); len(got) != 1 || got[0].Level != LevelError ||
		!strings.Contains(got[0].Message, `credentials.env "AWS_SECRET_ACCESS_KEY" is not among the variables`) {
		t.Errorf("pool off the list: %v\n%s", got, report)
	}
	if got := find(fs, "pool lab"); len(got) == 0 || got[len(got)-1].Level != LevelOK {
		t.Errorf("pool on the list: %v\n%s", got, report)
	}
	if slices.Contains(read, "AWS_SECRET_ACCESS_KEY") || called.Load() || strings.Contains(report, awsSecret) {
		t.Errorf("the refused credential was used: read %v, backend called %v\n%s", read, called.Load(), report)
	}
}

// Preflight reads the schema's version and changes nothing: a new build's preflight
// run before an upgrade must not migrate the database the running replicas use.
func TestPreflightDoesNotMigrate(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "db.sqlite") }},
		{"postgres", func(t *testing.T) string { return pgtest.SchemaURL(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbURL := tc.url(t)
			check := func(want string) {
				t.Helper()
				fs := Run(t.Context(), parse(t, "database: {url: '"+dbURL+"'}\n"), Options{Getenv: func(string) string { return "" }})
				got := find(fs, "database")
				if len(got) != 1 || got[0].Level != LevelOK || !strings.Contains(got[0].Message, want) {
					t.Fatalf("database findings %v, want ok with %q", got, want)
				}
			}
			check("pending migration")
			check("pending migration") // the first run applied nothing
			st, err := open.Open(t.Context(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			check("up to date")
		})
	}
}

// TestPoolConfigChecked: preflight reports a pool config its adapter would refuse
// as a config problem naming the key, and does not go on to build that pool.
func TestPoolConfigChecked(t *testing.T) {
	yaml := "pools:\n  - {name: ftp, adapter: remote, config: {endpoint: 'ftp://plugin.example/'}}\n" +
		"  - {name: typo, adapter: remote, config: {endpiont: 'http://127.0.0.1:1'}}\n"
	vars := map[string]string{config.EnvDatabaseURL: "sqlite://" + filepath.Join(t.TempDir(), "differently.db")}
	fs := Run(t.Context(), parse(t, yaml), Options{Getenv: func(k string) string { return vars[k] }})
	for name, want := range map[string]string{
		"ftp":  `pools[0].config.endpoint: remote config key "endpoint": "ftp://plugin.example/" must be an http or https URL`,
		"typo": `pools[1].config.endpiont: remote config: unknown key "endpiont"`,
	} {
		got := find(fs, "pool "+name)
		if len(got) != 1 || got[0].Level != LevelError || !strings.Contains(got[0].Message, want) {
			t.Errorf("pool %s: findings %v, want one error containing %q", name, got, want)
		}
	}
}
