// Package provider is the Terraform provider for Differently
// (registry.terraform.io/different-ai/differently): pools, the placement policy,
// projects and their quotas, profiles, project tokens (and short-lived ones that
// Terraform never stores), snapshots and long-lived sandboxes with drift detection.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// Address is the provider's registry address.
const Address = "registry.terraform.io/different-ai/differently"

// Environment variables the provider falls back to when its configuration leaves
// endpoint or token out.
const (
	EnvEndpoint = "DIFFERENTLY_ENDPOINT"
	EnvToken    = "DIFFERENTLY_TOKEN"
)

var (
	_ provider.ProviderWithEphemeralResources = (*differentlyProvider)(nil)
	_ provider.ProviderWithListResources      = (*differentlyProvider)(nil)
)

// New returns a constructor for the provider at the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &differentlyProvider{version: version, minted: &mintedTokens{}} }
}

type differentlyProvider struct {
	version string
	// minted outlives each Configure: see mintedTokens.
	minted *mintedTokens
}

type providerModel struct {
	Endpoint types.String `tfsdk:"endpoint"`
	Token    types.String `tfsdk:"token"`
}

func (p *differentlyProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "differently"
	resp.Version = p.version
}

func (p *differentlyProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Manages the pools, placement policy, projects and their quotas, profiles, project tokens, " +
			"snapshots and long-lived sandboxes of a [Differently](https://github.com/different-ai/differently) control plane.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				MarkdownDescription: "Base URL of the Differently API, for example `http://127.0.0.1:8700`. " +
					"Falls back to the `DIFFERENTLY_ENDPOINT` environment variable.",
				Optional: true,
			},
			"token": schema.StringAttribute{
				MarkdownDescription: "Bearer token for the API. Pools, policy, projects, profiles, tokens and the trust report need an " +
					"admin token; sandboxes and snapshots work with a project token too. " +
					"Falls back to the `DIFFERENTLY_TOKEN` environment variable. Checked when the provider is configured, " +
					"so a wrong or revoked token fails the plan at once.",
				Optional:  true,
				Sensitive: true,
			},
		},
	}
}

// Configure builds the API client and makes two cheap calls, readiness and one that
// needs the token, so that a wrong endpoint or token is reported once, at the
// provider, rather than as a confusing error on every resource.
func (p *differentlyProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Endpoint.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Unknown Differently endpoint",
			"The endpoint depends on a value not known until apply. Set it to a known value or use the "+EnvEndpoint+" environment variable.")
	}
	if cfg.Token.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Unknown Differently token",
			"The token depends on a value not known until apply. Set it to a known value or use the "+EnvToken+" environment variable.")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	endpoint := firstNonEmpty(cfg.Endpoint.ValueString(), os.Getenv(EnvEndpoint))
	token := firstNonEmpty(cfg.Token.ValueString(), os.Getenv(EnvToken))
	if endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Missing Differently endpoint",
			"Set endpoint in the provider configuration or the "+EnvEndpoint+" environment variable "+
				"to the daemon's URL, for example http://127.0.0.1:8700.")
	}
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing Differently token",
			"Set token in the provider configuration or the "+EnvToken+" environment variable. "+
				"`differently-server --dev` writes an admin token to admin-token in its data directory.")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := client.New(endpoint, token, client.WithUserAgent("terraform-provider-differently/"+p.version))
	if err != nil {
		// client.New's error quotes the endpoint as safeurl describes it.
		resp.Diagnostics.AddError("Invalid Differently endpoint", err.Error())
		return
	}
	r, err := c.API.GetReadyzWithResponse(ctx)
	switch {
	case err != nil:
		resp.Diagnostics.AddError("Differently daemon unreachable",
			fmt.Sprintf("Could not reach the daemon at %s: %s. Is it running, and is the endpoint right?", endpoint, err))
		return
	case r.StatusCode() != 200:
		// A proxy answering instead of the daemon may quote the request, token and all.
		body := adapters.NewRedactor(token).String(string(r.Body))
		resp.Diagnostics.AddError("Differently daemon not ready",
			fmt.Sprintf("GET %s/readyz answered %d: %s", endpoint, r.StatusCode(), body))
		return
	}
	resp.Diagnostics.Append(checkToken(ctx, c, endpoint, token)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.ResourceData = c
	resp.DataSourceData = c
	resp.ListResourceData = c
	resp.EphemeralResourceData = ephemeralData{c: c, minted: p.minted}
}

// checkToken makes one authenticated call, a list of at most one sandbox, which an
// admin and a project token may both make, so that a wrong or revoked token fails
// the plan here, once, rather than as an error on the first resource that reads.
// No diagnostic quotes the token: the daemon's answer is redacted too.
func checkToken(ctx context.Context, c *client.Client, endpoint, token string) diag.Diagnostics {
	var diags diag.Diagnostics
	_, err := c.ListSandboxes(ctx, &client.ListSandboxesParams{Limit: ptr(1)})
	if err == nil {
		return diags
	}
	redact := adapters.NewRedactor(token)
	var e *client.APIError
	if errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Code == api.CodeUnauthenticated) {
		diags.AddAttributeError(path.Root("token"), "Differently token rejected",
			fmt.Sprintf("The daemon at %s did not accept the token (the provider's token argument, else the %s "+
				"environment variable): %s. Check that it is a token of this daemon, not revoked and not expired.",
				endpoint, EnvToken, redact.String(e.Message)))
		return diags
	}
	diags.AddError("Checking the Differently token",
		fmt.Sprintf("Listing sandboxes at %s to check the token failed: %s", endpoint, redact.String(apiError(err))))
	return diags
}

func (p *differentlyProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		newPoolResource,
		newPolicyResource,
		newSandboxResource,
		newSnapshotResource,
		newProjectTokenResource,
		newProjectResource,
		newProfileResource,
	}
}

// EphemeralResources are the values Terraform never stores (Terraform 1.10 or later).
func (p *differentlyProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{newProjectTokenEphemeral}
}

// ListResources answer `terraform query` (Terraform 1.14 or later).
func (p *differentlyProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{newSandboxList, newPoolList, newProjectList, newSnapshotList}
}

func (p *differentlyProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		newPoolDataSource,
		newPoolsDataSource,
		newSandboxDataSource,
		newTrustReportDataSource,
	}
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
