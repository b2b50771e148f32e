package provider

import (
	"context"
	"fmt"

	"github.com/different-ai/differently/client"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var _ list.ListResourceWithConfigure = (*projectList)(nil)

func newProjectList() list.ListResource { return &projectList{} }

// projectList finds declared projects for `terraform query`.
type projectList struct{ lister }

type projectListConfig struct {
	Org types.String `tfsdk:"org"`
}

func (l *projectList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_project"
}

func (l *projectList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Finds declared projects (those with a quota), for `terraform query` (Terraform 1.14 or later) and " +
			"the import blocks it generates. A project some sandbox names without a declaration has nothing to " +
			"import and is left out. Admin tokens only.",
		Attributes: map[string]schema.Attribute{
			"org": schema.StringAttribute{
				Optional:    true,
				Description: "Only projects of this organization.",
			},
		},
	}
}

func (l *projectList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg projectListConfig
	if diags := req.Config.Get(ctx, &cfg); diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	if l.c == nil {
		stream.Results = list.ListResultsStreamDiagnostics(unconfigured("Listing projects"))
		return
	}
	stream.Results = func(push func(list.ListResult) bool) {
		pushAll(ctx, req, push, "projects",
			func() ([]client.Project, error) { return l.c.ListProjects(ctx) },
			func(p *client.Project) bool {
				o := cfg.Org.ValueString()
				return p.Declared && (o == "" || p.Org == o)
			},
			func(p *client.Project) (string, any) {
				return fmt.Sprintf("%s (%d sandboxes, quota %s)", projectID(p.Org, p.Name), p.Usage.Sandboxes, describeQuota(p.Quota)),
					projectIdentity{Org: types.StringValue(p.Org), Name: types.StringValue(p.Name)}
			},
			func(m *projectModel, p *client.Project, _ *diag.Diagnostics) { m.fromAPI(p) })
	}
}
