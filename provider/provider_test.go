package provider

import (
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/daemon/daemontest"
	"github.com/different-ai/differently/server/scheduler"
)

func TestMain(m *testing.M) {
	// Configurations (the examples among them) name the provider by its real source,
	// different-ai/differently; terraform-plugin-testing serves the provider under
	// the namespace this variable sets (hashicorp otherwise).
	if os.Getenv(resource.EnvTfAccProviderNamespace) == "" {
		os.Setenv(resource.EnvTfAccProviderNamespace, "different-ai")
	}
	os.Exit(m.Run())
}

// testDaemon is a development daemon (SQLite, the devhost and fake pools) running
// in-process on a loopback port for one test, with an admin client.
type testDaemon struct {
	url, token string
	c          *client.Client
	// passes gets a value after scheduler passes (at most one waits), for a test
	// waiting for the daemon to catch up.
	passes chan struct{}
}

func startDaemon(t *testing.T) *testDaemon {
	t.Helper()
	return startDaemonWith(t, nil)
}

// startDaemonWith is startDaemon with a config file's settings and pools.
func startDaemonWith(t *testing.T, cfg *config.Config) *testDaemon {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skip("acceptance tests run with TF_ACC=1 (make test or make testacc)")
	}
	passes := make(chan struct{}, 1)
	d := daemontest.Start(t, func(o *daemon.Options) {
		o.Config = cfg
		o.OnSchedulerPass = func(scheduler.Result) {
			select {
			case passes <- struct{}{}:
			default:
			}
		}
	})
	return &testDaemon{url: d.URL, token: d.Token, c: d.Client, passes: passes}
}

// config prefixes a configuration with a provider block pointing at the daemon.
func (d *testDaemon) config(body string) string {
	return fmt.Sprintf("provider \"differently\" {\n  endpoint = %q\n  token    = %q\n}\n\n%s", d.url, d.token, body)
}

// importConfig is config with the provider's source said, which a test whose first
// step is an import needs: the testing framework's default namespace is not applied
// to it.
func (d *testDaemon) importConfig(body string) string {
	return d.config(`terraform {
  required_providers {
    differently = { source = "different-ai/differently" }
  }
}
` + body)
}

// accTest runs an acceptance test case against the provider, served in-process.
// The suite needs Terraform 1.11 (write-only arguments, ephemeral variables in the
// examples); an older one fails each test saying so rather than somewhere inside.
func accTest(t *testing.T, tc resource.TestCase) {
	t.Helper()
	tc.TerraformVersionChecks = append(tc.TerraformVersionChecks, tfversion.RequireAbove(tfversion.Version1_11_0))
	tc.ProtoV6ProviderFactories = newMap(tc.ProtoV6ProviderFactories)
	tc.ProtoV6ProviderFactories["differently"] = providerserver.NewProtocol6WithError(New("test")())
	resource.Test(t, tc)
}

// newMap makes a map of m's type. It spares naming terraform-plugin-go's types,
// which go.mod carries as an indirect dependency only.
func newMap[M ~map[K]V, K comparable, V any](M) M { return make(M) }
