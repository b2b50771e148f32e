package provider

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

// importedKey marks, in a sandbox's private state, one that was imported, for the
// first plan after the import: the state cannot hold what the daemon never returns
// (env, init_commands; env_wo_version gets no leeway, so that secrets always reach
// the sandbox) or, for a sandbox made from a profile, which
// of its values the create named. The mark is an importMark. It ends at the first
// update, and at the latest at the second refresh after the import read: a first
// plan with nothing to apply (no update to end it) must not leave it for a change
// made weeks later, which would be recorded instead of replacing the sandbox.
const importedKey = "imported"

// importReadsAllowed is how many reads the mark outlives: the import's own read,
// and the refresh of the first plan after a terraform import command. An import
// block's plan follows the import's read directly, so there the mark lasts one plan
// longer than needed, which is the price of telling the two apart without a clue.
const importReadsAllowed = 2

// importMark is the import mark's value.
type importMark struct {
	// Reads counts the reads since the import.
	Reads int `json:"reads"`
	// Sandbox is what the daemon reported at the last read, for a sandbox made from
	// a profile.
	Sandbox *importedSandbox `json:"sandbox,omitempty"`
}

// readImportMark returns the mark, and whether there is one. A mark written by an
// earlier version (true), which lasted until the first update however long that
// took, counts as having had all its reads: the next read ends it.
func readImportMark(ctx context.Context, private privateGetter, diags *diag.Diagnostics) (importMark, bool) {
	raw, d := private.GetKey(ctx, importedKey)
	diags.Append(d...)
	var m importMark
	switch {
	case len(raw) == 0:
		return m, false
	case string(raw) == "true":
		return importMark{Reads: importReadsAllowed}, true
	case json.Unmarshal(raw, &m) != nil:
		return importMark{}, false
	}
	return m, true
}

const replaceUnlessImported = "Changing it replaces the sandbox, except the first time after an import, when the " +
	"state cannot know the value the sandbox was created with: the configured one is then recorded as it is."

const replaceUnlessImportedFromProfile = "Changing it replaces the sandbox, except the first time after the import " +
	"of a sandbox made from a profile, when a configured value that, merged with a profile, gives what the sandbox " +
	"has is recorded as it is."

// importedSandbox is what the daemon reports of an imported sandbox made from a
// profile: the arguments the create named merged with the profile's, with no way to
// tell which came from where. The state keeps those arguments null, as it does for
// a sandbox Terraform made from a profile, and the first plan compares the
// configuration with these values under the daemon's merge rules instead.
type importedSandbox struct {
	Template     string   `json:"template,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	AllowedPools []string `json:"allowedPools,omitempty"`
	Regions      []string `json:"regions,omitempty"`
}

func importedFrom(sb *client.Sandbox) importedSandbox {
	s := importedSandbox{Template: deref(sb.Template), Capabilities: sb.Capabilities}
	if sb.Placement != nil {
		s.AllowedPools, s.Regions = deref(sb.Placement.AllowedPools), deref(sb.Placement.Regions)
	}
	return s
}

// advanceImport counts a read against the import mark and ends it past
// importReadsAllowed; while it lasts, a sandbox made from a profile has its record
// brought up to date with what the daemon reports.
func advanceImport(ctx context.Context, sb *client.Sandbox, private privateState, diags *diag.Diagnostics) {
	m, ok := readImportMark(ctx, private, diags)
	if !ok {
		return
	}
	m.Reads++
	if m.Reads > importReadsAllowed {
		diags.Append(private.SetKey(ctx, importedKey, nil)...)
		return
	}
	m.Sandbox = nil
	if deref(sb.Profile) != "" {
		s := importedFrom(sb)
		m.Sandbox = &s
	}
	b, err := json.Marshal(m)
	if err != nil {
		diags.AddError("Recording an imported sandbox", err.Error())
		return
	}
	diags.Append(private.SetKey(ctx, importedKey, b)...)
}

// importedProfileSandbox is the import mark's record of a sandbox made from a
// profile, or nil: not imported, the mark over, or no profile.
func importedProfileSandbox(ctx context.Context, private privateGetter, diags *diag.Diagnostics) *importedSandbox {
	m, ok := readImportMark(ctx, private, diags)
	if !ok {
		return nil
	}
	return m.Sandbox
}

// The daemon merges a create with its profile this way: the profile's capabilities
// are added, and the template and each placement list are the profile's where the
// create leaves them empty. So a configured value fits the sandbox when it is what
// the sandbox has, or when it is empty (whatever the sandbox has may have come from
// the profile, as the profile was when the sandbox was made), and configured
// capabilities fit when the sandbox has each of them. Unknown values never fit.

func (s *importedSandbox) templateFits(v types.String) bool {
	return !v.IsUnknown() && (v.ValueString() == "" || v.ValueString() == s.Template)
}

func (s *importedSandbox) capabilitiesFit(v types.Set) bool {
	caps, ok := knownStrings(v)
	if !ok {
		return false
	}
	for _, c := range caps {
		if !slices.Contains(s.Capabilities, c) {
			return false
		}
	}
	return true
}

func (s *importedSandbox) placementFits(v types.Object) bool {
	if v.IsNull() {
		return true
	}
	if v.IsUnknown() {
		return false
	}
	fits := func(name string, actual []string) bool {
		l, _ := v.Attributes()[name].(types.List)
		items, ok := knownStrings(l)
		return ok && (len(items) == 0 || slices.Equal(items, actual))
	}
	return fits("allowed_pools", s.AllowedPools) && fits("regions", s.Regions)
}

// knownStrings reads a list or set of strings; ok is false when it, or one of its
// elements, is unknown. Null reads as no strings.
func knownStrings(v interface {
	IsNull() bool
	IsUnknown() bool
	Elements() []attr.Value
}) (items []string, ok bool) {
	if v.IsUnknown() {
		return nil, false
	}
	if v.IsNull() {
		return nil, true
	}
	for _, e := range v.Elements() {
		s, isString := e.(types.String)
		if !isString || s.IsUnknown() {
			return nil, false
		}
		items = append(items, s.ValueString())
	}
	return items, true
}

// The plan modifiers of the arguments a profile merges into: they replace the
// sandbox on a change unless it is the first plan after an import and the
// configured value fits the sandbox.

func templateReplaceIf() planmodifier.String {
	return stringplanmodifier.RequiresReplaceIf(
		func(ctx context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
			s := importedProfileSandbox(ctx, req.Private, &resp.Diagnostics)
			resp.RequiresReplace = s == nil || !s.templateFits(req.PlanValue)
		}, replaceUnlessImportedFromProfile, replaceUnlessImportedFromProfile)
}

func capabilitiesReplaceIf() planmodifier.Set {
	return setplanmodifier.RequiresReplaceIf(
		func(ctx context.Context, req planmodifier.SetRequest, resp *setplanmodifier.RequiresReplaceIfFuncResponse) {
			s := importedProfileSandbox(ctx, req.Private, &resp.Diagnostics)
			resp.RequiresReplace = s == nil || !s.capabilitiesFit(req.PlanValue)
		}, replaceUnlessImportedFromProfile, replaceUnlessImportedFromProfile)
}

func placementReplaceIf() planmodifier.Object {
	return objectplanmodifier.RequiresReplaceIf(
		func(ctx context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
			s := importedProfileSandbox(ctx, req.Private, &resp.Diagnostics)
			resp.RequiresReplace = s == nil || !s.placementFits(req.PlanValue)
		}, replaceUnlessImportedFromProfile, replaceUnlessImportedFromProfile)
}

// knownOnlyByImport reports whether a write-only value's state is null because the
// sandbox was imported rather than created with nothing: a configured value is then
// taken as the one the sandbox has, with no replacement. (Terraform cannot tell
// otherwise; replacing an imported long-lived sandbox at its first plan would be
// worse than trusting the configuration.)
func knownOnlyByImport(ctx context.Context, stateNull bool, private privateGetter, diags *diag.Diagnostics) bool {
	if !stateNull || private == nil {
		return false
	}
	_, ok := readImportMark(ctx, private, diags)
	return ok
}

// privateGetter is the part of the framework's private state a plan modifier reads.
type privateGetter interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

// privateState is the framework's private state as Read may change it.
type privateState interface {
	privateGetter
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}
