package config

import (
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
)

func TestValidate(t *testing.T) {
	const db = "database: {url: x.db}\n"
	tests := []struct {
		name string
		yaml string
		dev  bool
		want []string // one substring per expected problem, in order; none means valid
	}{
		{name: "minimal valid", yaml: db + "pools:\n  - {name: a, adapter: remote}\n"},
		{name: "dev pools in dev mode", dev: true,
			yaml: "pools:\n  - {name: dev, adapter: devhost, config: {root: /tmp/x}}\n  - {name: f, adapter: fake}\n"},
		{name: "database url required outside dev", yaml: "listen: a:1\n",
			want: []string{"database.url: required (or set DIFFERENTLY_DATABASE_URL)"}},
		{name: "duplicate pool names", yaml: db + "pools:\n  - {name: a, adapter: remote}\n  - {name: a, adapter: remote}\n",
			want: []string{`pool "a": pools[1].name: duplicate pool name (first used by pools[0])`}},
		{name: "bad pool names", yaml: db + "pools:\n  - {name: Lab_1, adapter: remote}\n  - {adapter: remote}\n  - {name: -a, adapter: remote}\n",
			want: []string{`pool "Lab_1": pools[0].name: must be`, `pools[1].name: required`, `pool "-a": pools[2].name: must be`}},
		{name: "unknown adapter lists known kinds", yaml: db + "pools:\n  - {name: a, adapter: lab-fleet}\n",
			want: []string{`pool "a": pools[0].adapter: adapter kind "lab-fleet" is not in this build (known kinds: devhost, fake, remote)`}},
		{name: "adapter required", yaml: db + "pools:\n  - {name: a}\n",
			want: []string{`pools[0].adapter: required`}},
		{name: "devhost outside dev", yaml: db + "pools:\n  - {name: a, adapter: devhost, config: {root: /x}}\n  - {name: b, adapter: fake}\n",
			want: []string{"adapter devhost is only allowed in development mode (--dev)", "adapter fake is only allowed in development mode (--dev)"}},
		{name: "bad trust", yaml: db + "pools:\n  - {name: a, adapter: remote, trust: public}\n",
			want: []string{`pools[0].trust: must be "private" or "external", got "public"`}},
		{name: "negative limits and costs", yaml: db + "pools:\n  - name: a\n    adapter: remote\n    maxConcurrency: -1\n    maxStarting: -2\n    costModel: {cpuHour: -0.5, memoryGiBHour: -1}\n",
			want: []string{"pools[0].maxConcurrency: must not be negative, got -1", "pools[0].maxStarting: must not be negative, got -2",
				"pools[0].costModel.cpuHour: must be a finite number not below 0", "pools[0].costModel.memoryGiBHour"}},
		{name: "file transfer bounds", yaml: db + "files: {maxTransfers: 0, maxProjectTransfers: -1, largeTransferBytes: 0}\n",
			want: []string{"files.maxTransfers: must be at least 1, got 0", "files.maxProjectTransfers: must be at least 1, got -1",
				"files.largeTransferBytes: must be at least 1, got 0"}},
		{name: "negative maxConnections", yaml: db + "maxConnections: -1\n",
			want: []string{"maxConnections: must be 0 (the default) or more, got -1"}},
		{name: "maxConnections", yaml: db + "maxConnections: 100\n"},
		{name: "unknown feature", yaml: db + "pools:\n  - {name: a, adapter: remote, features: [exec, teleport]}\n",
			want: []string{`pool "a": pools[0].features: unknown features: teleport`}},
		{name: "isolation.none may be declared", yaml: db + "pools:\n  - {name: a, adapter: remote, features: [isolation.none]}\n"},
		{name: "bad credentials env", yaml: db + "pools:\n  - {name: a, adapter: remote, credentials: {env: 1TOKEN}}\n",
			want: []string{`pools[0].credentials.env: credentials.env "1TOKEN" is not an environment variable name`}},
		{name: "credentials env of the daemon's own", yaml: db + "pools:\n  - {name: a, adapter: remote, credentials: {env: DIFFERENTLY_DATABASE_URL}}\n",
			want: []string{`pools[0].credentials.env: credentials.env "DIFFERENTLY_DATABASE_URL" is one of the daemon's own variables`}},
		{name: "credentials env on the allowlist", yaml: db + "poolCredentials: {allowedEnv: [DAYTONA_*, LAB_ADAPTER_TOKEN]}\n" +
			"pools:\n  - {name: a, adapter: remote, credentials: {env: LAB_ADAPTER_TOKEN}}\n  - {name: b, adapter: remote, credentials: {env: DAYTONA_EU_KEY}}\n  - {name: c, adapter: remote}\n"},
		{name: "credentials env off the allowlist", yaml: db + "poolCredentials: {allowedEnv: [DAYTONA_*]}\n" +
			"pools:\n  - {name: a, adapter: remote, credentials: {env: AWS_SECRET_ACCESS_KEY}}\n",
			want: []string{`pool "a": pools[0].credentials.env: credentials.env "AWS_SECRET_ACCESS_KEY" is not among the variables the daemon's operator allows pools to name (poolCredentials.allowedEnv in the daemon's config file: DAYTONA_*)`}},
		{name: "empty allowlist allows none", yaml: db + "poolCredentials: {allowedEnv: []}\n" +
			"pools:\n  - {name: a, adapter: remote, credentials: {env: LAB_ADAPTER_TOKEN}}\n  - {name: b, adapter: remote}\n",
			want: []string{`pools[0].credentials.env: credentials.env "LAB_ADAPTER_TOKEN" is refused: the daemon's operator allows no pool credentials variables`}},
		{name: "allowlist left empty is no list", yaml: db + "poolCredentials: {allowedEnv: }\n" +
			"pools:\n  - {name: a, adapter: remote, credentials: {env: LAB_ADAPTER_TOKEN}}\n"},
		// A bad entry is left out, which refuses more than the file meant, never less.
		{name: "bad allowlist entries", yaml: db + "poolCredentials: {allowedEnv: [DAYTONA_*, '*', LAB-TOKEN, PG*]}\n" +
			"pools:\n  - {name: a, adapter: remote, credentials: {env: AWS_SECRET_ACCESS_KEY}}\n  - {name: b, adapter: remote, credentials: {env: DAYTONA_KEY}}\n",
			want: []string{`poolCredentials.allowedEnv[1]: "*" allows every variable`, `poolCredentials.allowedEnv[2]: "LAB-TOKEN" is neither a variable name`,
				`poolCredentials.allowedEnv[3]: "PG*" names only the daemon's own variables`,
				`pools[0].credentials.env: credentials.env "AWS_SECRET_ACCESS_KEY" is not among the variables the daemon's operator allows pools to name (poolCredentials.allowedEnv in the daemon's config file: DAYTONA_*)`}},
		{name: "scheduler zero and listen bad", yaml: db + "listen: nonsense\nscheduler: {maxAttempts: 0}\n",
			want: []string{`listen: want host:port, got "nonsense"`, "scheduler.maxAttempts: must be at least 1, got 0"}},
		{name: "tls needs both files", yaml: db + "tls: {certFile: a.crt}\n",
			want: []string{"tls: certFile and keyFile go together"}},
		{name: "all problems at once", yaml: "pools:\n  - {name: a, adapter: nope}\n  - {name: a, adapter: fake, maxConcurrency: -1}\n",
			want: []string{"database.url", `"nope" is not in this build`, "duplicate pool name", "only allowed in development mode", "maxConcurrency"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate(ValidateOptions{Dev: tt.dev, KnownAdapters: known, DevOnlyAdapters: devOnly})
			probs := Problems(err)
			if len(probs) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(probs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(probs[i].Error(), w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, probs[i], w)
				}
			}
		})
	}
}

func TestTrustRules(t *testing.T) {
	known := []string{"remote", "fake", "devhost", "opensandbox", "daytona"}
	tests := []struct {
		adapter string
		trust   api.Trust
		want    api.Trust
		problem string
	}{
		{adapter: "remote", want: api.TrustPrivate},
		{adapter: "remote", trust: api.TrustExternal, want: api.TrustExternal},
		{adapter: "fake", want: api.TrustPrivate},
		{adapter: "devhost", want: api.TrustPrivate},
		{adapter: "daytona", want: api.TrustExternal},
		{adapter: "daytona", trust: api.TrustExternal, want: api.TrustExternal},
		{adapter: "daytona", trust: api.TrustPrivate, want: api.TrustExternal, problem: `trust must be "external"`},
		{adapter: "opensandbox", trust: api.TrustPrivate, want: api.TrustPrivate},
		{adapter: "opensandbox", want: "", problem: "required for adapter opensandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.adapter+"/"+string(tt.trust), func(t *testing.T) {
			cfg := Default()
			cfg.Database.URL = "x.db"
			cfg.Pools = []PoolConfig{{Name: "p", Adapter: tt.adapter, Trust: tt.trust}}
			if got := cfg.Pools[0].StorePool().Trust; got != tt.want {
				t.Errorf("trust = %q, want %q", got, tt.want)
			}
			err := cfg.Validate(ValidateOptions{Dev: true, KnownAdapters: known, DevOnlyAdapters: devOnly})
			switch {
			case tt.problem == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)):
				t.Errorf("Validate = %v, want a problem containing %q", err, tt.problem)
			}
		})
	}
}
