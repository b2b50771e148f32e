package provider

import (
	"context"
	"math"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The rules the daemon checks at apply time are checked at plan time too.
func TestPlanTimeValidators(t *testing.T) {
	str := func(v validator.String, s string) bool {
		var resp validator.StringResponse
		v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: types.StringValue(s)}, &resp)
		return !resp.Diagnostics.HasError()
	}
	for _, c := range []struct {
		v    validator.String
		in   string
		want bool
	}{
		{nameValidator{}, "ci-pool", true},
		{nameValidator{}, "a", true},
		{nameValidator{}, "CI_Pool", false},
		{nameValidator{}, "-x", false},
		{nameValidator{}, "x-", false},
		{nameValidator{}, "", false},
		{nameValidator{}, string(make([]byte, 64)), false},
		{credentialsEnvValidator{}, "LAB_ADAPTER_TOKEN", true},
		{credentialsEnvValidator{}, "1TOKEN", false},
		{credentialsEnvValidator{}, "DIFFERENTLY_DATABASE_URL", false},
		{credentialsEnvValidator{}, "differently_x", false},
		{credentialsEnvValidator{}, "PGPASSWORD", false},
	} {
		if got := str(c.v, c.in); got != c.want {
			t.Errorf("%T(%q) ok = %v, want %v", c.v, c.in, got, c.want)
		}
	}
	for f, want := range map[float64]bool{0: true, 0.5: true, -0.01: false, math.Inf(1): false} {
		var resp validator.Float64Response
		nonNegativeFloat{}.ValidateFloat64(context.Background(), validator.Float64Request{Path: path.Root("x"), ConfigValue: types.Float64Value(f)}, &resp)
		if got := !resp.Diagnostics.HasError(); got != want {
			t.Errorf("nonNegativeFloat(%v) ok = %v, want %v", f, got, want)
		}
	}
	// Unknown and null values wait for apply.
	var resp validator.StringResponse
	nameValidator{}.ValidateString(context.Background(), validator.StringRequest{ConfigValue: types.StringUnknown()}, &resp)
	credentialsEnvValidator{}.ValidateString(context.Background(), validator.StringRequest{ConfigValue: types.StringNull()}, &resp)
	if resp.Diagnostics.HasError() {
		t.Errorf("unknown or null refused: %v", resp.Diagnostics)
	}
}
