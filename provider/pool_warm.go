package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/store"
)

// A pool's warm shapes (docs/pools.md, "Warm pools"): `warm` is the configured list,
// `warm_status` what the daemon has of each shape now.

var (
	warmShapeTypes = map[string]attr.Type{
		"template":        types.StringType,
		"profile":         types.StringType,
		"resources":       types.ObjectType{AttrTypes: resourcesTypes},
		"size":            types.Int64Type,
		"max_age_seconds": types.Int64Type,
	}
	warmStatusTypes = map[string]attr.Type{
		"template":     types.StringType,
		"profile":      types.StringType,
		"resources":    types.ObjectType{AttrTypes: resourcesTypes},
		"target":       types.Int64Type,
		"ready":        types.Int64Type,
		"starting":     types.Int64Type,
		"hits":         types.Int64Type,
		"misses":       types.Int64Type,
		"claim_p50_ms": types.Float64Type,
		"claim_p99_ms": types.Float64Type,
	}
)

// Descriptions of warm_status's counts, the same in the resource and the data source.
const (
	warmHitsDescription   = "Creates given one of the shape's warm sandboxes, on every replica, since the pool was created; a replica records its counts within about two seconds."
	warmMissesDescription = "Creates the shape matched that found none ready and were created cold."
	warmP50Description    = "How long taking a warm sandbox took at the median, in milliseconds, estimated from a histogram; null before the first hit."
	warmP99Description    = "The same at the 99th percentile."
)

type warmShapeModel struct {
	Template      types.String `tfsdk:"template"`
	Profile       types.String `tfsdk:"profile"`
	Resources     types.Object `tfsdk:"resources"`
	Size          types.Int64  `tfsdk:"size"`
	MaxAgeSeconds types.Int64  `tfsdk:"max_age_seconds"`
}

const warmDescription = "Kinds of sandbox the pool keeps started ahead of demand. A create asking for exactly a " +
	"shape's template, profile and resources, with no `env` and no snapshot, is given one of them at once and the " +
	"pool starts another. The daemon's list is compared with this one on every refresh, so a shape changed through " +
	"the admin API shows as a difference. Shrinking a shape deletes its newest ready sandboxes; removing it empties " +
	"it. Destroying the pool empties its shapes first and waits for their sandboxes to be gone."

func warmAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		MarkdownDescription: warmDescription,
		Optional:            true,
		Validators: []validator.List{
			listvalidator.SizeAtMost(store.MaxWarmShapes),
			distinctWarmShapes{},
		},
		NestedObject: schema.NestedAttributeObject{
			Attributes: map[string]schema.Attribute{
				"template": schema.StringAttribute{
					MarkdownDescription: "Template the warm sandboxes run. Left out: the adapter's default, or the profile's.",
					Optional:            true,
					Validators:          []validator.String{stringvalidator.LengthAtMost(api.MaxTemplateBytes)},
				},
				"profile": schema.StringAttribute{
					MarkdownDescription: "Profile the warm sandboxes are made from; a create naming it matches.",
					Optional:            true,
					Validators:          nameValidators(),
				},
				"resources": schema.SingleNestedAttribute{
					MarkdownDescription: "Resources of the warm sandboxes; a value left out is 0, the pool's default.",
					Optional:            true,
					Attributes: map[string]schema.Attribute{
						"cpu": schema.Float64Attribute{
							MarkdownDescription: "vCPUs.", Optional: true,
							Validators: []validator.Float64{float64validator.Between(0, api.MaxCPU)},
						},
						"memory_mib": schema.Int64Attribute{
							MarkdownDescription: "Memory in MiB.", Optional: true,
							Validators: []validator.Int64{int64validator.Between(0, api.MaxMemoryMiB)},
						},
						"disk_gib": schema.Int64Attribute{
							MarkdownDescription: "Disk in GiB.", Optional: true,
							Validators: []validator.Int64{int64validator.Between(0, api.MaxDiskGiB)},
						},
					},
				},
				"size": schema.Int64Attribute{
					MarkdownDescription: fmt.Sprintf("How many the pool keeps, started or starting: 0 to %d.", store.MaxWarmSize),
					Required:            true,
					Validators:          []validator.Int64{int64validator.Between(0, store.MaxWarmSize)},
				},
				"max_age_seconds": schema.Int64Attribute{
					MarkdownDescription: fmt.Sprintf("When set and not 0 (at least %d), a warm sandbox that has waited this "+
						"long is replaced.", store.MinWarmMaxAgeSeconds),
					Optional: true,
					Validators: []validator.Int64{int64validator.Any(
						int64validator.OneOf(0),
						int64validator.Between(store.MinWarmMaxAgeSeconds, api.MaxTTLSeconds),
					)},
				},
			},
		},
	}
}

func warmStatusAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		MarkdownDescription: "Per warm shape, in the order of `warm`, what the daemon's database has now: `target` " +
			"(the size), `ready` (running, waiting for a create) and `starting` (queued or provisioning); and how it " +
			"served creates: `hits`, `misses` and the claims' `claim_p50_ms` and `claim_p99_ms`. These change as " +
			"sandboxes are created, which a refresh records without planning any change.",
		Computed: true,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"template":     schema.StringAttribute{Computed: true, MarkdownDescription: "The shape's template."},
			"profile":      schema.StringAttribute{Computed: true, MarkdownDescription: "The shape's profile."},
			"resources":    schema.ObjectAttribute{Computed: true, AttributeTypes: resourcesTypes, MarkdownDescription: "The shape's resources."},
			"target":       schema.Int64Attribute{Computed: true, MarkdownDescription: "The shape's size."},
			"ready":        schema.Int64Attribute{Computed: true, MarkdownDescription: "Running and waiting for a create."},
			"starting":     schema.Int64Attribute{Computed: true, MarkdownDescription: "Queued or provisioning."},
			"hits":         schema.Int64Attribute{Computed: true, MarkdownDescription: warmHitsDescription},
			"misses":       schema.Int64Attribute{Computed: true, MarkdownDescription: warmMissesDescription},
			"claim_p50_ms": schema.Float64Attribute{Computed: true, MarkdownDescription: warmP50Description},
			"claim_p99_ms": schema.Float64Attribute{Computed: true, MarkdownDescription: warmP99Description},
		}},
	}
}

// warmDataSourceAttributes are warm and warm_status for the pool data source.
func warmDataSourceAttributes() (warm, status dsschema.ListNestedAttribute) {
	warm = dsschema.ListNestedAttribute{
		MarkdownDescription: "Kinds of sandbox the pool keeps started ahead of demand.",
		Computed:            true,
		NestedObject: dsschema.NestedAttributeObject{Attributes: map[string]dsschema.Attribute{
			"template":        dsschema.StringAttribute{Computed: true, MarkdownDescription: "Template the warm sandboxes run."},
			"profile":         dsschema.StringAttribute{Computed: true, MarkdownDescription: "Profile they are made from."},
			"resources":       dsschema.ObjectAttribute{Computed: true, AttributeTypes: resourcesTypes, MarkdownDescription: "Their resources."},
			"size":            dsschema.Int64Attribute{Computed: true, MarkdownDescription: "How many the pool keeps."},
			"max_age_seconds": dsschema.Int64Attribute{Computed: true, MarkdownDescription: "Age at which one is replaced; 0 never."},
		}},
	}
	status = dsschema.ListNestedAttribute{
		MarkdownDescription: "Per warm shape: `target`, `ready`, `starting`, `hits`, `misses`, `claim_p50_ms` and `claim_p99_ms`.",
		Computed:            true,
		NestedObject: dsschema.NestedAttributeObject{Attributes: map[string]dsschema.Attribute{
			"template":     dsschema.StringAttribute{Computed: true, MarkdownDescription: "The shape's template."},
			"profile":      dsschema.StringAttribute{Computed: true, MarkdownDescription: "The shape's profile."},
			"resources":    dsschema.ObjectAttribute{Computed: true, AttributeTypes: resourcesTypes, MarkdownDescription: "The shape's resources."},
			"target":       dsschema.Int64Attribute{Computed: true, MarkdownDescription: "The shape's size."},
			"ready":        dsschema.Int64Attribute{Computed: true, MarkdownDescription: "Running and waiting for a create."},
			"starting":     dsschema.Int64Attribute{Computed: true, MarkdownDescription: "Queued or provisioning."},
			"hits":         dsschema.Int64Attribute{Computed: true, MarkdownDescription: warmHitsDescription},
			"misses":       dsschema.Int64Attribute{Computed: true, MarkdownDescription: warmMissesDescription},
			"claim_p50_ms": dsschema.Float64Attribute{Computed: true, MarkdownDescription: warmP50Description},
			"claim_p99_ms": dsschema.Float64Attribute{Computed: true, MarkdownDescription: warmP99Description},
		}},
	}
	return warm, status
}

// warmShapes reads the configured shapes, nil for none.
func warmShapes(ctx context.Context, l types.List, diags *diag.Diagnostics) []warmShapeModel {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []warmShapeModel
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	return out
}

// storeShape is a configured shape in the daemon's terms; unknown values count as
// unset (validation runs again at apply, when they are known).
func (w warmShapeModel) storeShape(ctx context.Context, diags *diag.Diagnostics) store.WarmShape {
	s := store.WarmShape{
		Template:      w.Template.ValueString(),
		Profile:       w.Profile.ValueString(),
		Size:          int(w.Size.ValueInt64()),
		MaxAgeSeconds: w.MaxAgeSeconds.ValueInt64(),
	}
	if !w.Resources.IsNull() && !w.Resources.IsUnknown() {
		var r struct {
			CPU       types.Float64 `tfsdk:"cpu"`
			MemoryMiB types.Int64   `tfsdk:"memory_mib"`
			DiskGiB   types.Int64   `tfsdk:"disk_gib"`
		}
		diags.Append(w.Resources.As(ctx, &r, objectAsOptions)...)
		s.Resources = adapters.Resources{CPU: r.CPU.ValueFloat64(), MemoryMiB: r.MemoryMiB.ValueInt64(), DiskGiB: r.DiskGiB.ValueInt64()}
	}
	return s
}

// warmSpec is the warm list PUT and POST take: every shape, [] for none, since the
// configuration is the pool's whole definition.
func warmSpec(ctx context.Context, l types.List, diags *diag.Diagnostics) *[]client.WarmShape {
	out := []client.WarmShape{}
	for _, w := range warmShapes(ctx, l, diags) {
		s := w.storeShape(ctx, diags)
		out = append(out, client.WarmShape{
			Template:      ptrIf(s.Template),
			Profile:       ptrIf(s.Profile),
			Resources:     &client.Resources{CPU: s.Resources.CPU, MemoryMiB: s.Resources.MemoryMiB, DiskGiB: s.Resources.DiskGiB},
			Size:          s.Size,
			MaxAgeSeconds: ptr(s.MaxAgeSeconds),
		})
	}
	return &out
}

func ptrIf(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// warmValue is the daemon's list of shapes in the model. The daemon says "" or 0
// for a template, profile, resources (or one of their fields) or max_age_seconds
// left out: those are null, as a configuration leaving them out has them, unless the
// prior value, shape by shape, wrote the "" or 0 out. An import, with no prior
// value, thus matches the usual configuration, which leaves them out. A list left
// out stays null when the daemon has no shapes.
func warmValue(prior types.List, got []client.WarmShape) types.List {
	elemType := types.ObjectType{AttrTypes: warmShapeTypes}
	if len(got) == 0 && (prior.IsNull() || prior.IsUnknown()) {
		return types.ListNull(elemType)
	}
	var had []types.Object
	if !prior.IsNull() && !prior.IsUnknown() {
		for _, e := range prior.Elements() {
			if o, ok := e.(types.Object); ok {
				had = append(had, o)
			}
		}
	}
	vals := make([]attr.Value, len(got))
	for i, w := range got {
		var was map[string]attr.Value
		if i < len(had) && !had[i].IsNull() && !had[i].IsUnknown() {
			was = had[i].Attributes()
		}
		res := client.Resources{}
		if w.Resources != nil {
			res = *w.Resources
		}
		resources := types.ObjectNull(resourcesTypes)
		if p, ok := was["resources"].(types.Object); res != (client.Resources{}) || (ok && !p.IsNull() && !p.IsUnknown()) {
			resources = warmResources(was["resources"], res)
		}
		vals[i] = types.ObjectValueMust(warmShapeTypes, map[string]attr.Value{
			"template":        zeroAsNull(was["template"], types.StringValue(deref(w.Template))),
			"profile":         zeroAsNull(was["profile"], types.StringValue(deref(w.Profile))),
			"resources":       resources,
			"size":            types.Int64Value(int64(w.Size)),
			"max_age_seconds": zeroAsNull(was["max_age_seconds"], types.Int64Value(deref(w.MaxAgeSeconds))),
		})
	}
	return types.ListValueMust(elemType, vals)
}

// zeroAsNull is v, except that "" or 0 is null unless prior wrote it out.
func zeroAsNull(prior, v attr.Value) attr.Value {
	zero := isKnownZero(v)
	if s, ok := v.(types.String); ok {
		zero = s.ValueString() == ""
	}
	if !zero || (prior != nil && !prior.IsNull() && !prior.IsUnknown() && prior.Equal(v)) {
		return v
	}
	return nullOf(v)
}

func nullOf(v attr.Value) attr.Value {
	switch v.(type) {
	case types.String:
		return types.StringNull()
	case types.Float64:
		return types.Float64Null()
	default:
		return types.Int64Null()
	}
}

// warmResources is a shape's resources, a field at 0 null unless the prior value
// wrote the 0 out.
func warmResources(prior attr.Value, r client.Resources) types.Object {
	vals := resourcesValue(r).Attributes()
	var was map[string]attr.Value
	if o, ok := prior.(types.Object); ok && !o.IsNull() && !o.IsUnknown() {
		was = o.Attributes()
	}
	for name, v := range vals {
		vals[name] = zeroAsNull(was[name], v)
	}
	return types.ObjectValueMust(resourcesTypes, vals)
}

// warmStatusValue is the daemon's warm status, an empty list for none.
func warmStatusValue(got []client.WarmStatus) types.List {
	vals := make([]attr.Value, len(got))
	for i, s := range got {
		vals[i] = types.ObjectValueMust(warmStatusTypes, map[string]attr.Value{
			"template":     types.StringValue(s.Template),
			"profile":      types.StringValue(s.Profile),
			"resources":    resourcesValue(s.Resources),
			"target":       types.Int64Value(int64(s.Target)),
			"ready":        types.Int64Value(int64(s.Ready)),
			"starting":     types.Int64Value(int64(s.Starting)),
			"hits":         types.Int64Value(s.Hits),
			"misses":       types.Int64Value(s.Misses),
			"claim_p50_ms": types.Float64PointerValue(s.ClaimP50Ms),
			"claim_p99_ms": types.Float64PointerValue(s.ClaimP99Ms),
		})
	}
	return types.ListValueMust(types.ObjectType{AttrTypes: warmStatusTypes}, vals)
}

// distinctWarmShapes refuses two shapes alike (the same template, profile and
// resources), which the daemon refuses too (store.ValidateWarm), at plan time.
type distinctWarmShapes struct{}

func (distinctWarmShapes) Description(context.Context) string {
	return "no two shapes may have the same template, profile and resources"
}

func (v distinctWarmShapes) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (distinctWarmShapes) ValidateList(ctx context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	seen := map[string]int{}
	for i, w := range warmShapes(ctx, req.ConfigValue, &resp.Diagnostics) {
		if w.Template.IsUnknown() || w.Profile.IsUnknown() || w.Resources.IsUnknown() {
			continue
		}
		key := w.storeShape(ctx, &resp.Diagnostics).Key()
		if j, ok := seen[key]; ok {
			resp.Diagnostics.AddAttributeError(req.Path.AtListIndex(i), "Repeated warm shape",
				fmt.Sprintf("warm[%d] has the template, profile and resources of warm[%d]; give it a size of its own instead.", i, j))
			continue
		}
		seen[key] = i
	}
}
