package provider

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// Free-form JSON objects (a pool's adapter config, the policy's defaults) are dynamic
// attributes: `config = { root = "/x", createErrors = ["sandbox_failed"] }` keeps its
// nesting, lists included, instead of being squeezed into a map of strings or a JSON
// string. HCL gives such a value an object type with tuples for lists, and jsonToValue
// builds exactly those types from the API's JSON, so an import reads back the same
// value a configuration writes.

// valueToJSON turns a known Terraform value into the Go value encoding/json would
// produce: objects and maps become map[string]any, lists, sets and tuples []any,
// numbers int64 when whole and float64 otherwise.
func valueToJSON(v attr.Value) (any, error) {
	if v == nil || v.IsNull() {
		return nil, nil
	}
	if v.IsUnknown() {
		return nil, fmt.Errorf("value is not known yet")
	}
	switch x := v.(type) {
	case basetypes.DynamicValue:
		if x.IsUnderlyingValueNull() {
			return nil, nil
		}
		if x.IsUnderlyingValueUnknown() {
			return nil, fmt.Errorf("value is not known yet")
		}
		return valueToJSON(x.UnderlyingValue())
	case basetypes.StringValue:
		return x.ValueString(), nil
	case basetypes.BoolValue:
		return x.ValueBool(), nil
	case basetypes.NumberValue:
		return bigToJSON(x.ValueBigFloat()), nil
	case basetypes.Int64Value:
		return x.ValueInt64(), nil
	case basetypes.Float64Value:
		return x.ValueFloat64(), nil
	case basetypes.ObjectValue:
		return attrsToJSON(x.Attributes())
	case basetypes.MapValue:
		return attrsToJSON(x.Elements())
	case basetypes.ListValue:
		return elemsToJSON(x.Elements())
	case basetypes.SetValue:
		return elemsToJSON(x.Elements())
	case basetypes.TupleValue:
		return elemsToJSON(x.Elements())
	}
	return nil, fmt.Errorf("unsupported value type %s", v.Type(nil))
}

func bigToJSON(f *big.Float) any {
	if f.IsInt() {
		if i, acc := f.Int64(); acc == big.Exact {
			return i
		}
	}
	out, _ := f.Float64()
	return out
}

func attrsToJSON(m map[string]attr.Value) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, e := range m {
		j, err := valueToJSON(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = j
	}
	return out, nil
}

func elemsToJSON(elems []attr.Value) ([]any, error) {
	out := make([]any, len(elems))
	for i, e := range elems {
		j, err := valueToJSON(e)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = j
	}
	return out, nil
}

// jsonToValue is the inverse of valueToJSON for values decoded from JSON: objects
// become objects, arrays tuples, numbers numbers. A JSON null becomes a null string,
// the closest typed null Terraform can hold inside an object.
func jsonToValue(v any) (attr.Value, error) {
	switch x := v.(type) {
	case nil:
		return types.StringNull(), nil
	case string:
		return types.StringValue(x), nil
	case bool:
		return types.BoolValue(x), nil
	case float64:
		return types.NumberValue(big.NewFloat(x)), nil
	case float32:
		return types.NumberValue(big.NewFloat(float64(x))), nil
	case int:
		return types.NumberValue(new(big.Float).SetInt64(int64(x))), nil
	case int64:
		return types.NumberValue(new(big.Float).SetInt64(x)), nil
	case json.Number:
		f, _, err := big.ParseFloat(x.String(), 10, 512, big.ToNearestEven)
		if err != nil {
			return nil, err
		}
		return types.NumberValue(f), nil
	case []any:
		elems := make([]attr.Value, len(x))
		typs := make([]attr.Type, len(x))
		for i, e := range x {
			ev, err := jsonToValue(e)
			if err != nil {
				return nil, err
			}
			elems[i], typs[i] = ev, ev.Type(nil)
		}
		t, d := types.TupleValue(typs, elems)
		if d.HasError() {
			return nil, fmt.Errorf("tuple: %v", d)
		}
		return t, nil
	case []string:
		items := make([]any, len(x))
		for i, s := range x {
			items[i] = s
		}
		return jsonToValue(items)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make(map[string]attr.Value, len(x))
		typs := make(map[string]attr.Type, len(x))
		for _, k := range keys {
			ev, err := jsonToValue(x[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			vals[k], typs[k] = ev, ev.Type(nil)
		}
		o, d := types.ObjectValue(typs, vals)
		if d.HasError() {
			return nil, fmt.Errorf("object: %v", d)
		}
		return o, nil
	}
	return nil, fmt.Errorf("unsupported JSON value of type %T", v)
}

// sameJSON compares two JSON-shaped values after a round trip through encoding/json,
// so that int64(3) and float64(3) are equal.
func sameJSON(a, b any) bool {
	na, errA := normaliseJSON(a)
	nb, errB := normaliseJSON(b)
	return errA == nil && errB == nil && reflect.DeepEqual(na, nb)
}

func normaliseJSON(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(data, &out)
}

// dynamicObject reads a free-form JSON object from the API into a dynamic attribute.
// When the prior value means the same JSON, it is kept as it is, so that its exact
// HCL types (a list written as a list, a map as a map) never show as a difference.
// An empty object keeps a null prior null: the API always answers an object.
func dynamicObject(prior types.Dynamic, m map[string]any) (types.Dynamic, error) {
	if !prior.IsNull() && !prior.IsUnknown() {
		if pj, err := valueToJSON(prior); err == nil && sameJSON(pj, m) {
			return prior, nil
		}
	}
	if len(m) == 0 && (prior.IsNull() || prior.IsUnknown() || prior.IsUnderlyingValueNull()) {
		return types.DynamicNull(), nil
	}
	v, err := jsonToValue(m)
	if err != nil {
		return types.DynamicNull(), err
	}
	return types.DynamicValue(v), nil
}

// dynamicToObject reads a dynamic attribute for the API: null is nil, and anything
// but an object or map is an error naming the attribute.
func dynamicToObject(name string, v types.Dynamic) (map[string]any, error) {
	j, err := valueToJSON(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if j == nil {
		return nil, nil
	}
	m, ok := j.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an object such as { key = \"value\" }, not %T", name, j)
	}
	return m, nil
}
