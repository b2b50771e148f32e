package provider

import (
	"math/big"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// hclConfig is what Terraform sends for
// config = { root = "/x", n = 3, on = true, createErrors = ["sandbox_failed"], nested = { a = 1.5 } }.
func hclConfig() types.Dynamic {
	tuple := types.TupleValueMust([]attr.Type{types.StringType}, []attr.Value{types.StringValue("sandbox_failed")})
	nested := types.ObjectValueMust(map[string]attr.Type{"a": types.NumberType},
		map[string]attr.Value{"a": types.NumberValue(big.NewFloat(1.5))})
	obj := types.ObjectValueMust(
		map[string]attr.Type{"root": types.StringType, "n": types.NumberType, "on": types.BoolType,
			"createErrors": tuple.Type(nil), "nested": nested.Type(nil)},
		map[string]attr.Value{"root": types.StringValue("/x"), "n": types.NumberValue(big.NewFloat(3)),
			"on": types.BoolValue(true), "createErrors": tuple, "nested": nested})
	return types.DynamicValue(obj)
}

// apiConfig is the same object as the daemon answers it, decoded from JSON.
func apiConfig() map[string]any {
	return map[string]any{"root": "/x", "n": float64(3), "on": true,
		"createErrors": []any{"sandbox_failed"}, "nested": map[string]any{"a": 1.5}}
}

func TestDynamicToObject(t *testing.T) {
	got, err := dynamicToObject("config", hclConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(got, apiConfig()) {
		t.Fatalf("got %#v", got)
	}
	if got["n"] != int64(3) {
		t.Errorf("whole numbers should be int64, got %T", got["n"])
	}
	if m, err := dynamicToObject("config", types.DynamicNull()); err != nil || m != nil {
		t.Errorf("null: %v, %v", m, err)
	}
	if _, err := dynamicToObject("config", types.DynamicValue(types.StringValue("x"))); err == nil {
		t.Error("a string config was accepted")
	}
	if _, err := dynamicToObject("config", types.DynamicUnknown()); err == nil {
		t.Error("an unknown config was accepted")
	}
}

func TestDynamicObjectKeepsEquivalentPrior(t *testing.T) {
	prior := hclConfig()
	got, err := dynamicObject(prior, apiConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(prior) {
		t.Errorf("an equivalent answer replaced the prior value: %v", got)
	}
}

func TestDynamicObjectFromAPI(t *testing.T) {
	// Import: no prior value. The result has HCL's own types, so it equals what a
	// configuration writes.
	got, err := dynamicObject(types.DynamicNull(), apiConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(hclConfig()) {
		t.Errorf("got %v, want %v", got, hclConfig())
	}
	// Drift: a changed answer replaces the prior value.
	changed := apiConfig()
	changed["createErrors"] = []any{}
	got, err = dynamicObject(hclConfig(), changed)
	if err != nil {
		t.Fatal(err)
	}
	if got.Equal(hclConfig()) {
		t.Error("a changed config was not noticed")
	}
	// The API always answers an object: empty is null when the prior was null...
	if got, _ := dynamicObject(types.DynamicNull(), map[string]any{}); !got.IsNull() {
		t.Errorf("empty answer with null prior gave %v", got)
	}
	// ...and stays an empty object when the configuration wrote {}.
	empty := types.DynamicValue(types.ObjectValueMust(map[string]attr.Type{}, map[string]attr.Value{}))
	if got, _ := dynamicObject(empty, map[string]any{}); !got.Equal(empty) {
		t.Errorf("empty answer with {} prior gave %v", got)
	}
}

func TestNullOrEmptyHelpers(t *testing.T) {
	if v := optString(types.StringNull(), ptr("")); !v.IsNull() {
		t.Errorf("optString(null, \"\") = %v", v)
	}
	if v := optString(types.StringValue(""), nil); v.IsNull() {
		t.Error("optString(\"\", nil) lost the empty string")
	}
	if v := stringSet(types.SetNull(types.StringType), nil); !v.IsNull() {
		t.Errorf("stringSet(null, nil) = %v", v)
	}
	emptySet := types.SetValueMust(types.StringType, nil)
	if v := stringSet(emptySet, []string{}); v.IsNull() {
		t.Error("stringSet([], []) became null")
	}
	if v := stringMap(types.MapNull(types.StringType), map[string]string{}); !v.IsNull() {
		t.Errorf("stringMap(null, {}) = %v", v)
	}
	if v := stringList(types.ListNull(types.StringType), []string{"a"}); len(v.Elements()) != 1 {
		t.Errorf("stringList = %v", v)
	}
}

func TestTail(t *testing.T) {
	long := make([]byte, maxOutputInDiagnostic+10)
	for i := range long {
		long[i] = 'x'
	}
	if got := tail(string(long)); len(got) != maxOutputInDiagnostic+len("[...]") {
		t.Errorf("tail length %d", len(got))
	}
	if tail("short") != "short" {
		t.Error("short output changed")
	}
}
