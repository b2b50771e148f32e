package provider

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// installConfig is a root module that reads the daemon's pools through the provider
// installed from this checkout and outputs their names.
func installConfig(d *testDaemon) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    differently = { source = "different-ai/differently" }
  }
}

provider "differently" {
  endpoint = %q
  token    = %q
}

data "differently_pools" "all" {}

output "pools" {
  value = [for p in data.differently_pools.all.pools : p.name]
}
`, d.url, d.token)
}

// offlineTerraform runs the terraform the acceptance tests use in dir with the CLI
// configuration cliConfig and every registry out of reach: a proxy on a port nothing
// listens on for HTTP and HTTPS (loopback, the daemon, is never proxied), so that any
// attempt to download a provider fails the command.
func offlineTerraform(t *testing.T, dir, cliConfig string, args ...string) string {
	t.Helper()
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		tf = "terraform"
	}
	cmd := exec.CommandContext(t.Context(), tf, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+cliConfig,
		"TF_PLUGIN_CACHE_DIR=",
		"CHECKPOINT_DISABLE=1",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
		"https_proxy=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9",
		"NO_PROXY=", "no_proxy=",
		"HOME="+t.TempDir(),
		"TF_IN_AUTOMATION=1",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runMake runs a target of the repository's GNUmakefile and returns its output.
func runMake(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "make", append([]string{"-s", "-C", ".."}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// printedConfig takes the CLI configuration a make target prints (between its first
// comment line and "# Use it with:") and the file its export line names, and checks
// that the two are the same.
func printedConfig(t *testing.T, out string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, ":\n")
	block, tail, ok2 := strings.Cut(rest, "# Use it with:\n")
	file, ok3 := strings.CutPrefix(strings.TrimSpace(tail), "export TF_CLI_CONFIG_FILE=")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("output without a configuration and an export line:\n%s", out)
	}
	written, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(written) != block {
		t.Fatalf("printed:\n%s\nwritten to %s:\n%s", block, file, written)
	}
	return file
}

// TestProviderDev: the CLI configuration make provider-dev prints makes terraform
// plan use the provider built from this checkout, without terraform init and
// without reaching a registry.
func TestProviderDev(t *testing.T) {
	d := startDaemon(t)
	bin := t.TempDir()
	out := runMake(t, "provider-dev", "BIN="+bin)
	file := printedConfig(t, out)
	if !strings.Contains(out, `"different-ai/differently" = "`+bin+`"`) {
		t.Fatalf("the dev_overrides block does not point at %s:\n%s", bin, out)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(installConfig(d)), 0o600); err != nil {
		t.Fatal(err)
	}
	plan := offlineTerraform(t, dir, file, "plan", "-input=false", "-no-color")
	for _, want := range []string{"Provider development overrides are in effect", `"devhost"`} {
		if !strings.Contains(plan, want) {
			t.Fatalf("plan output lacks %q:\n%s", want, plan)
		}
	}
}

// TestProviderMirror: make provider-mirror lays the provider out as a filesystem
// mirror whose printed CLI configuration lets terraform init install it, and plan
// use it, without reaching a registry: a team's offline first apply.
func TestProviderMirror(t *testing.T) {
	d := startDaemon(t)
	mirror := t.TempDir()
	out := runMake(t, "provider-mirror", "MIRROR="+mirror, "PROVIDER_VERSION=0.3.1")
	file := printedConfig(t, out)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(installConfig(d)), 0o600); err != nil {
		t.Fatal(err)
	}
	init := offlineTerraform(t, dir, file, "init", "-input=false", "-no-color")
	if !strings.Contains(init, "Installed different-ai/differently v0.3.1") {
		t.Fatalf("init did not install the mirror's provider:\n%s", init)
	}
	plan := offlineTerraform(t, dir, file, "plan", "-input=false", "-no-color")
	if !strings.Contains(plan, `"devhost"`) {
		t.Fatalf("plan output lacks the daemon's pools:\n%s", plan)
	}
}
