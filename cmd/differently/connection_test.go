package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/client"
)

// The connection comes from flags, the environment, a named context or a local
// development daemon's token file, in that order; refusals and a daemon that is down
// give one line with a hint and their own exit codes; the token is printed nowhere.
func TestConnection(t *testing.T) {
	dd := startDaemon(t)
	down := closedPort(t)

	t.Run("environment", func(t *testing.T) {
		var pools struct{ Items []client.Pool }
		dd.cli(t).json(&pools, "pools", "ls")
		if want := dd.devPools(t); len(pools.Items) != len(want) {
			t.Errorf("pools ls: %+v, want %v", pools.Items, want)
		}
	})

	t.Run("flags before the environment", func(t *testing.T) {
		c := dd.cli(t, "DIFFERENTLY_ENDPOINT="+down, "DIFFERENTLY_TOKEN=wrong-token-value")
		c.ok("pools", "ls", "--endpoint", dd.url, "--token", dd.token)
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(dd.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.ok("pools", "ls", "--endpoint", dd.url, "--token-file", tokenFile)
	})

	t.Run("development daemon's token file", func(t *testing.T) {
		c := dd.cli(t, "DIFFERENTLY_TOKEN=")
		c.fails(exitAuth, []string{"401", "unauthenticated", "hint:", "no token was found"}, "pools", "ls")
		// The file a development daemon writes, in the data folder the CLI computes
		// as the daemon does.
		data := filepath.Join(envOf(c, "XDG_DATA_HOME"), "differently")
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "admin-token"), []byte(dd.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.ok("pools", "ls")
		show := c.ok("context", "show", "-o", "json")
		if !strings.Contains(show.stdout, "admin-token") {
			t.Errorf("context show does not name the token file: %s", show.stdout)
		}
		// Never sent to a daemon elsewhere.
		var elsewhere map[string]string
		c.json(&elsewhere, "context", "show", "--endpoint", "http://differently.invalid:8700")
		if elsewhere["tokenFrom"] != "none" {
			t.Errorf("a remote endpoint would get the development token: %v", elsewhere)
		}
	})

	t.Run("contexts", func(t *testing.T) {
		c := dd.cli(t, "DIFFERENTLY_ENDPOINT=", "DIFFERENTLY_TOKEN=")
		c.runIn(dd.token+"\n", "context", "set", "dev", "--url", dd.url, "--token-stdin")
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(dd.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.ok("context", "set", "down", "--url", down, "--token-file", tokenFile)
		c.ok("pools", "ls")
		c.fails(exitUnreachable, []string{"cannot reach the daemon at " + down}, "pools", "ls", "--context", "down")
		c.ok("context", "use", "down")
		c.fails(exitUnreachable, []string{"cannot reach"}, "pools", "ls")
		c.ok("pools", "ls", "--context", "dev")
		withEnv := &cli{t: t, env: append(append([]string{}, c.env...), "DIFFERENTLY_CONTEXT=dev")}
		withEnv.ok("pools", "ls")
		c.ok("context", "set", "broken", "--url", dd.url, "--token-file", "/nonexistent")
		c.fails(exitUsage, []string{"context broken", "token-file"}, "pools", "ls", "--context", "broken")
		c.ok("context", "rm", "broken")
		var list []struct {
			Name, Endpoint, Token string
			Current               bool
		}
		c.json(&list, "context", "ls")
		if len(list) != 2 || list[0].Name != "dev" || list[0].Token != "stored" || list[0].Current || !list[1].Current {
			t.Errorf("context ls: %+v", list)
		}
		cfg, err := os.ReadFile(filepath.Join(envOf(c, "XDG_CONFIG_HOME"), "differently", "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg), "current-context: down") {
			t.Errorf("config file:\n%s", cfg)
		}
		c.ok("context", "rm", "down")
		c.ok("pools", "ls", "--context", "dev")
		c.fails(exitUsage, []string{`context "gone"`}, "pools", "ls", "--context", "gone")
	})

	t.Run("wrong token", func(t *testing.T) {
		r := dd.cli(t, "DIFFERENTLY_TOKEN=wrong-token-value").fails(exitAuth,
			[]string{"401 unauthenticated", "hint:", "DIFFERENTLY_TOKEN was refused"}, "ls")
		if strings.Contains(r.stderr, "wrong-token-value") {
			t.Errorf("the error shows the token: %s", r.stderr)
		}
	})

	t.Run("daemon down", func(t *testing.T) {
		dd.cli(t, "DIFFERENTLY_ENDPOINT="+down).fails(exitUnreachable,
			[]string{"cannot reach the daemon at " + down, "connection refused", "hint:", "differently-server --dev"}, "ls")
		// exec and run keep their exit codes for the command: their own failures are 125.
		dd.cli(t, "DIFFERENTLY_ENDPOINT="+down).fails(execFailed, []string{"cannot reach"}, "run", "--", "true")
	})

	t.Run("usage", func(t *testing.T) {
		c := dd.cli(t)
		c.fails(exitUsage, []string{"unknown flag"}, "ls", "--no-such-flag")
		c.fails(exitUsage, []string{"--output"}, "ls", "-o", "xml")
		c.fails(exitUsage, []string{"accepts 1 arg(s)"}, "get")
		c.fails(exitUsage, []string{"unknown command"}, "lst")
		c.fails(exitUsage, []string{"key=value"}, "create", "--label", "novalue")
		c.fails(exitUsage, []string{"http or https"}, "ls", "--endpoint", "ftp://x")
	})
}

func envOf(c *cli, name string) string {
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// No command prints the token: not the context commands, not an error, not help.
func TestTokenNeverPrinted(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t)
	c.runIn(dd.token, "context", "set", "dev", "--url", dd.url, "--token-stdin")
	for _, args := range [][]string{
		{"context", "ls"}, {"context", "ls", "-o", "yaml"}, {"context", "show", "-o", "json"}, {"--help"},
		{"ls", "--endpoint", closedPort(t)}, {"tokens", "ls", "-o", "json"}, {"get", "sbx_missing"},
	} {
		r := c.run(args...)
		if strings.Contains(r.stdout+r.stderr, dd.token) {
			t.Errorf("differently %s printed the token", strings.Join(args, " "))
		}
	}
}
