package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var _ list.ListResourceWithConfigure = (*sandboxList)(nil)

func newSandboxList() list.ListResource { return &sandboxList{} }

// sandboxList finds sandboxes for `terraform query`.
type sandboxList struct{ lister }

type sandboxListConfig struct {
	Project types.String `tfsdk:"project"`
	Pool    types.String `tfsdk:"pool"`
	Labels  types.Map    `tfsdk:"labels"`
	States  types.List   `tfsdk:"states"`
}

// importableStates are the states a differently_sandbox can hold: a read of a
// terminating, terminated or failed sandbox removes it from the state.
var importableStates = []string{
	string(client.Queued), string(client.Provisioning), string(client.Running), string(client.Stopped), string(client.Paused),
}

func (l *sandboxList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandbox"
}

func (l *sandboxList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	every := []string{string(client.Queued), string(client.Provisioning), string(client.Running), string(client.Stopped),
		string(client.Paused), string(client.Terminating), string(client.Terminated), string(client.Failed)}
	resp.Schema = schema.Schema{
		Description: "Finds sandboxes, for `terraform query` (Terraform 1.14 or later) and the import blocks it " +
			"generates. Every filter narrows the search; with none, every sandbox the token may see that a " +
			"`differently_sandbox` could manage.",
		Attributes: map[string]schema.Attribute{
			"project": schema.StringAttribute{
				Optional:    true,
				Description: "One project, as `org/name`, or a project name in any organisation. Admin tokens only; a project token sees its own project.",
				Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"pool": schema.StringAttribute{
				Optional:    true,
				Description: "Only sandboxes placed on this pool.",
				Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"labels": schema.MapAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "Only sandboxes carrying every one of these labels with these values.",
			},
			"states": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "Only sandboxes in one of these states. Default: " + strings.Join(importableStates, ", ") +
					" (a terminating, terminated or failed sandbox cannot be imported).",
				Validators: []validator.List{
					listvalidator.SizeAtLeast(1),
					listvalidator.ValueStringsAre(stringvalidator.OneOf(every...)),
				},
			},
		},
	}
}

func (l *sandboxList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg sandboxListConfig
	if diags := req.Config.Get(ctx, &cfg); diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	var diags diag.Diagnostics
	params := client.ListSandboxesParams{Project: strPtr(cfg.Project), Pool: strPtr(cfg.Pool)}
	states := stringsOf(ctx, cfg.States, &diags)
	if len(states) == 0 {
		states = importableStates
	}
	st := make([]client.SandboxState, len(states))
	for i, s := range states {
		st[i] = client.SandboxState(s)
	}
	params.State = &st
	labels := map[string]string{}
	if !cfg.Labels.IsNull() && !cfg.Labels.IsUnknown() {
		diags.Append(cfg.Labels.ElementsAs(ctx, &labels, false)...)
	}
	if len(labels) > 0 {
		pairs := make([]string, 0, len(labels))
		for k, v := range labels {
			pairs = append(pairs, k+"="+v)
		}
		sort.Strings(pairs)
		params.Label = &pairs
	}
	if diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	if l.c == nil {
		stream.Results = list.ListResultsStreamDiagnostics(unconfigured("Listing sandboxes"))
		return
	}
	stream.Results = func(push func(list.ListResult) bool) {
		var sent int64
		for {
			page, err := l.c.ListSandboxes(ctx, &params)
			if err != nil {
				push(failed("Listing sandboxes", apiError(err)))
				return
			}
			for i := range page.Items {
				if !within(req, sent) {
					return
				}
				sb := &page.Items[i]
				r := result(ctx, req, sandboxDisplayName(sb), idIdentity{ID: types.StringValue(sb.Id)},
					func(m *sandboxModel, diags *diag.Diagnostics) { m.fromAPI(ctx, sb, diags) })
				if !push(r) {
					return
				}
				sent++
			}
			if deref(page.NextCursor) == "" {
				return
			}
			params.Cursor = page.NextCursor
		}
	}
}

// sandboxDisplayName says which sandbox a result is in a few words: its ID, then
// what it runs and where, for example "sbx-1a2b (python on local, running)".
func sandboxDisplayName(sb *client.Sandbox) string {
	what := deref(sb.Template)
	if p := deref(sb.Profile); p != "" {
		what = "profile " + p
	}
	if what == "" {
		what = "sandbox"
	}
	if pool := deref(sb.Pool); pool != "" {
		what += " on " + pool
	}
	return fmt.Sprintf("%s (%s, %s, project %s/%s)", sb.Id, what, sb.State, sb.Org, sb.Project)
}
