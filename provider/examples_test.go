package provider

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccExamples applies every example configuration under examples/ (the complete
// one, and each resource's and data source's, which the documentation shows) against
// a fresh daemon and destroys it again, so the examples cannot rot. The provider is
// configured through DIFFERENTLY_ENDPOINT and DIFFERENTLY_TOKEN, as a reader's would be.
func TestAccExamples(t *testing.T) {
	var files []string
	for _, pattern := range []string{
		"../examples/complete/*.tf",
		"../examples/resources/*/resource.tf",
		"../examples/data-sources/*/data-source.tf",
		"../examples/ephemeral-resources/*/ephemeral-resource.tf",
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d examples: %v", len(files), files)
	}
	for _, file := range files {
		name, _ := filepath.Rel("../examples", file)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			d := startDaemon(t)
			t.Setenv(EnvEndpoint, d.url)
			t.Setenv(EnvToken, d.token)
			accTest(t, resource.TestCase{
				CheckDestroy: d.sandboxesGone,
				Steps:        []resource.TestStep{{Config: string(src)}},
			})
		})
	}
}
