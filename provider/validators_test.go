package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// validatorCase is one value of one attribute, named by its path in the schema with
// dots (a list's nested attribute named as if the list were an object), and
// whether the plan-time validators accept it.
type validatorCase struct {
	attr string
	val  any // string, int64 or float64
	ok   bool
}

// checkValidators runs the validators of r's schema on each case, as Terraform would
// at plan time, and checks that null and unknown values are left for apply.
func checkValidators(t *testing.T, r resource.Resource, cases []validatorCase) {
	t.Helper()
	var resp resource.SchemaResponse
	r.Schema(context.Background(), resource.SchemaRequest{}, &resp)
	for _, c := range cases {
		a := schemaAttr(t, resp.Schema.Attributes, c.attr)
		got, nullOK, unknownOK := runValidators(t, a, c.val)
		if got != c.ok {
			t.Errorf("%s = %v: accepted %v, want %v", c.attr, c.val, got, c.ok)
		}
		if !nullOK || !unknownOK {
			t.Errorf("%s: null accepted %v, unknown accepted %v; both wait for apply", c.attr, nullOK, unknownOK)
		}
	}
}

func schemaAttr(t *testing.T, attrs map[string]schema.Attribute, dotted string) schema.Attribute {
	t.Helper()
	name, rest, nested := strings.Cut(dotted, ".")
	a, ok := attrs[name]
	if !ok {
		t.Fatalf("no attribute %s", name)
	}
	if !nested {
		return a
	}
	switch a := a.(type) {
	case schema.SingleNestedAttribute:
		return schemaAttr(t, a.Attributes, rest)
	case schema.ListNestedAttribute:
		return schemaAttr(t, a.NestedObject.Attributes, rest)
	}
	t.Fatalf("%s is not nested", name)
	return nil
}

// runValidators reports whether a's validators accept v, null and unknown.
func runValidators(t *testing.T, a schema.Attribute, v any) (ok, nullOK, unknownOK bool) {
	t.Helper()
	ctx, p := context.Background(), path.Root("x")
	switch a := a.(type) {
	case interface{ StringValidators() []validator.String }:
		run := func(val types.String) bool {
			var resp validator.StringResponse
			for _, vd := range a.StringValidators() {
				vd.ValidateString(ctx, validator.StringRequest{Path: p, ConfigValue: val}, &resp)
			}
			return !resp.Diagnostics.HasError()
		}
		return run(types.StringValue(v.(string))), run(types.StringNull()), run(types.StringUnknown())
	case interface{ Int64Validators() []validator.Int64 }:
		run := func(val types.Int64) bool {
			var resp validator.Int64Response
			for _, vd := range a.Int64Validators() {
				vd.ValidateInt64(ctx, validator.Int64Request{Path: p, ConfigValue: val}, &resp)
			}
			return !resp.Diagnostics.HasError()
		}
		return run(types.Int64Value(v.(int64))), run(types.Int64Null()), run(types.Int64Unknown())
	case interface{ Float64Validators() []validator.Float64 }:
		run := func(val types.Float64) bool {
			var resp validator.Float64Response
			for _, vd := range a.Float64Validators() {
				vd.ValidateFloat64(ctx, validator.Float64Request{Path: p, ConfigValue: val}, &resp)
			}
			return !resp.Diagnostics.HasError()
		}
		return run(types.Float64Value(v.(float64))), run(types.Float64Null()), run(types.Float64Unknown())
	}
	t.Fatalf("no validators of a %T", a)
	return false, false, false
}

func schemaAttrOf(t *testing.T, r resource.Resource, dotted string) schema.Attribute {
	t.Helper()
	var resp resource.SchemaResponse
	r.Schema(context.Background(), resource.SchemaRequest{}, &resp)
	return schemaAttr(t, resp.Schema.Attributes, dotted)
}
