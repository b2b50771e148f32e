package provider

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/go-version"
)

// requireTerraform skips a test that drives the terraform CLI itself when the one the
// acceptance tests use is older than min.
func requireTerraform(t *testing.T, min string) {
	t.Helper()
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		tf = "terraform"
	}
	out, err := exec.CommandContext(t.Context(), tf, "version", "-json").Output()
	if err != nil {
		t.Fatalf("terraform version: %v", err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("terraform version -json: %v\n%s", err, out)
	}
	if version.Must(version.NewVersion(v.Version)).LessThan(version.Must(version.NewVersion(min))) {
		t.Skipf("needs Terraform %s or later; this is %s", min, v.Version)
	}
}

// TestQueryGeneratesImports is the bulk import an operator does when adopting
// Terraform: terraform query -generate-config-out writes an import block (by
// identity) and configuration for everything it finds; the plan of that
// configuration imports every object and changes none, and once applied the next
// plan is empty.
func TestQueryGeneratesImports(t *testing.T) {
	d := startDaemon(t)
	requireTerraform(t, "1.14.0")
	o := makeOutsideTerraform(t, d)
	file := printedConfig(t, runMake(t, "provider-dev", "BIN="+t.TempDir()))
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("main.tf", d.importConfig(""))
	write("adopt.tfquery.hcl", `
list "differently_sandbox" "team" {
  provider         = differently
  include_resource = true
  config {
    pool = "fake"
  }
}

list "differently_pool" "fake" {
  provider         = differently
  include_resource = true
  config {
    adapter = "fake"
  }
}

list "differently_project" "acme" {
  provider         = differently
  include_resource = true
  config {
    org = "acme"
  }
}

list "differently_snapshot" "all" {
  provider         = differently
  include_resource = true
}
`)
	offlineTerraform(t, dir, file, "query", "-generate-config-out=generated.tf", "-no-color")
	raw, err := os.ReadFile(filepath.Join(dir, "generated.tf"))
	if err != nil {
		t.Fatal(err)
	}
	gen := string(raw)
	for _, want := range []string{o.data.Id, o.web.Id, o.snapshot.Id, `"extra"`, `"acme"`} {
		if !regexp.MustCompile(`(?s)import \{[^}]*identity = \{[^}]*` + regexp.QuoteMeta(want)).MatchString(gen) {
			t.Errorf("no import block by identity for %s in generated.tf:\n%s", want, gen)
		}
	}
	// Two sandboxes, the development fake pool and "extra", one project, one snapshot.
	if n := strings.Count(gen, "import {"); n != 6 {
		t.Errorf("%d import blocks, want 6:\n%s", n, gen)
	}
	if t.Failed() {
		return
	}
	plan := offlineTerraform(t, dir, file, "plan", "-no-color", "-input=false")
	if !strings.Contains(plan, "Plan: 6 to import, 0 to add, 0 to change, 0 to destroy.") {
		t.Fatalf("the generated configuration does not import cleanly:\n%s\n\ngenerated.tf:\n%s", plan, gen)
	}
	offlineTerraform(t, dir, file, "apply", "-no-color", "-input=false", "-auto-approve")
	if again := offlineTerraform(t, dir, file, "plan", "-no-color", "-input=false"); !strings.Contains(again, "No changes.") {
		t.Fatalf("after the import, a plan still has changes:\n%s", again)
	}
}
