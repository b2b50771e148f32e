package provider

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

var (
	_ ephemeral.EphemeralResourceWithConfigure = (*projectTokenEphemeral)(nil)
	_ ephemeral.EphemeralResourceWithClose     = (*projectTokenEphemeral)(nil)
)

// defaultEphemeralTokenTTL is the lifetime of a minted token when the
// configuration names none: long enough for a CI job's apply, short enough that a
// token a crash kept from being revoked does not outlive the job by much.
const defaultEphemeralTokenTTL = time.Hour

// minEphemeralTokenTTL keeps a token from expiring before Terraform has used it.
const minEphemeralTokenTTL = 60

// tokenIDKey holds, in the ephemeral resource's private data, the ID of the token
// Open minted, for Close to revoke.
const tokenIDKey = "token_id"

func newProjectTokenEphemeral() ephemeral.EphemeralResource { return &projectTokenEphemeral{} }

// projectTokenEphemeral mints a project token for the length of one Terraform run:
// Open issues it with an expiry, Close revokes it, and Terraform keeps it in neither
// the plan nor the state.
type projectTokenEphemeral struct{ ephemeralData }

// ephemeralData is what Configure gives ephemeral resources: the client, and the
// tokens minted so far.
type ephemeralData struct {
	c      *client.Client
	minted *mintedTokens
}

// mintedTokens remembers, per token minted, the client that minted it, so that
// Close revokes it as Open's caller did even when the provider was configured again
// in between: a provider serving several configurations (an alias configured with
// the minted secret, say) from one process, as Terraform does with a provider it
// did not start itself, would otherwise revoke with the alias's token.
type mintedTokens struct {
	mu sync.Mutex
	by map[string]*client.Client
}

func (m *mintedTokens) add(id string, c *client.Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[string]*client.Client{}
	}
	m.by[id] = c
}

// take forgets id and returns the client that minted it, or nil.
func (m *mintedTokens) take(id string) *client.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.by[id]
	delete(m.by, id)
	return c
}

type projectTokenEphemeralModel struct {
	Org        types.String `tfsdk:"org"`
	Project    types.String `tfsdk:"project"`
	Name       types.String `tfsdk:"name"`
	TTLSeconds types.Int64  `tfsdk:"ttl_seconds"`
	ID         types.String `tfsdk:"id"`
	Secret     types.String `tfsdk:"secret"`
	ExpiresAt  types.String `tfsdk:"expires_at"`
}

func (r *projectTokenEphemeral) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_project_token"
}

func (r *projectTokenEphemeral) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A short-lived API token scoped to one project, minted for one Terraform run and never " +
			"stored in the plan or the state (Terraform 1.10 or later). Terraform issues it when it needs the value " +
			"(in plan and again in apply) with an expiry, and revokes it when the run is done; a token a crash kept " +
			"from being revoked stops working at its expiry. Use it where a value must not be stored: a provider " +
			"alias acting for the project (`token = ephemeral.differently_project_token.ci.secret`), or a write-only " +
			"argument of another provider. For a token that outlives the run, use the `differently_project_token` " +
			"resource. Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"org": schema.StringAttribute{
				MarkdownDescription: "Organisation of the project. Defaults to `default`.",
				Optional:            true,
				Computed:            true,
			},
			"project": schema.StringAttribute{
				MarkdownDescription: "Project the token acts for.",
				Required:            true,
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "A label for people, shown while the token is listed.",
				Optional:            true,
			},
			"ttl_seconds": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("Seconds the token is accepted for, from when it is issued: at least %d; "+
					"defaults to %d (an hour). Revoked sooner, at the end of the run, when Terraform can.",
					minEphemeralTokenTTL, int64(defaultEphemeralTokenTTL/time.Second)),
				Optional:   true,
				Computed:   true,
				Validators: []validator.Int64{int64validator.Between(minEphemeralTokenTTL, api.MaxTTLSeconds)},
			},
			"id": schema.StringAttribute{
				MarkdownDescription: "The token's ID (`tok_...`), which is not a secret.",
				Computed:            true,
			},
			"secret": schema.StringAttribute{
				MarkdownDescription: "The bearer secret (`dly_...`).",
				Computed:            true,
				Sensitive:           true,
			},
			"expires_at": schema.StringAttribute{
				MarkdownDescription: "When the token stops being accepted (RFC 3339).",
				Computed:            true,
			},
		},
	}
}

func (r *projectTokenEphemeral) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	if req.ProviderData == nil {
		return // not configured yet
	}
	data, ok := req.ProviderData.(ephemeralData)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data",
			fmt.Sprintf("expected ephemeralData, got %T; this is a bug in the provider.", req.ProviderData))
		return
	}
	r.ephemeralData = data
}

func (r *projectTokenEphemeral) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m projectTokenEphemeralModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Org.IsNull() || m.Org.ValueString() == "" {
		m.Org = types.StringValue("default")
	}
	if m.TTLSeconds.IsNull() {
		m.TTLSeconds = types.Int64Value(int64(defaultEphemeralTokenTTL / time.Second))
	}
	out, err := r.c.CreateToken(ctx, client.TokenCreate{
		Scope:      client.TokenCreateScopeProject,
		Org:        strPtr(m.Org),
		Project:    strPtr(m.Project),
		Name:       strPtr(m.Name),
		TtlSeconds: ptr(m.TTLSeconds.ValueInt64()),
	})
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Minting a token for project %s/%s", m.Org.ValueString(), m.Project.ValueString()),
			apiError(err))
		return
	}
	if out.Token.ExpiresAt == nil {
		// A daemon from before tokens could expire ignores ttlSeconds: the token would
		// live until revoked, so it is revoked now rather than handed out.
		_ = r.c.DeleteToken(ctx, out.Token.Id)
		resp.Diagnostics.AddError(fmt.Sprintf("Minting a token for project %s/%s", m.Org.ValueString(), m.Project.ValueString()),
			"The daemon issued a token without an expiry: it predates expiring tokens. Upgrade it, or use the "+
				"differently_project_token resource.")
		return
	}
	r.minted.add(out.Token.Id, r.c)
	m.ID = types.StringValue(out.Token.Id)
	m.Secret = types.StringValue(out.Secret)
	m.ExpiresAt = types.StringValue(out.Token.ExpiresAt.UTC().Format(time.RFC3339))
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, tokenIDKey, []byte(fmt.Sprintf("%q", out.Token.Id)))...)
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
}

// Close revokes the token Open minted. One already gone (revoked by hand) is fine.
func (r *projectTokenEphemeral) Close(ctx context.Context, req ephemeral.CloseRequest, resp *ephemeral.CloseResponse) {
	raw, d := req.Private.GetKey(ctx, tokenIDKey)
	resp.Diagnostics.Append(d...)
	if len(raw) < 2 {
		return
	}
	id := string(raw[1 : len(raw)-1])
	c := r.minted.take(id)
	if c == nil {
		c = r.c // minted by another process of the provider
	}
	if err := c.DeleteToken(ctx, id); err != nil && !client.IsNotFound(err) {
		resp.Diagnostics.AddError("Revoking the minted token "+id,
			apiError(err)+"\n\nThe token stops being accepted at its expiry anyway.")
	}
}
