package adapters_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestOwnershipLabels(t *testing.T) {
	in := map[string]string{"team": "a", adapters.LabelSandboxID: "forged"}
	got := adapters.OwnershipLabels(in, "sbx_1", "inst_1")
	want := map[string]string{"team": "a", adapters.LabelSandboxID: "sbx_1", adapters.LabelInstallation: "inst_1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if !reflect.DeepEqual(in, map[string]string{"team": "a", adapters.LabelSandboxID: "forged"}) {
		t.Errorf("input mutated: %v", in)
	}
	got["team"] = "b"
	if in["team"] != "a" {
		t.Error("result aliases the input")
	}
	if nilIn := adapters.OwnershipLabels(nil, "s", "i"); len(nilIn) != 2 {
		t.Errorf("nil input gives %v", nilIn)
	}
}

func TestValidateLabels(t *testing.T) {
	many := map[string]string{}
	for i := range adapters.MaxLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	exactlyMax := map[string]string{}
	for i := range adapters.MaxLabels {
		exactlyMax[fmt.Sprintf("k%d", i)] = "v"
	}
	tests := []struct {
		name   string
		labels map[string]string
		ok     bool
	}{
		{"nil", nil, true},
		{"typical", map[string]string{"team": "infra", "app.kubernetes.io/name": "x-y_z", "0k": ""}, true},
		{"max count", exactlyMax, true},
		{"max key and value", map[string]string{strings.Repeat("k", adapters.MaxLabelKeyBytes): strings.Repeat("v", adapters.MaxLabelValueBytes)}, true},
		{"unicode value", map[string]string{"k": "héllo wörld"}, true},
		{"too many", many, false},
		{"reserved prefix", map[string]string{adapters.LabelOrg: "x"}, false},
		{"reserved prefix any key", map[string]string{adapters.ReservedLabelPrefix + "mine": "x"}, false},
		{"empty key", map[string]string{"": "x"}, false},
		{"long key", map[string]string{strings.Repeat("k", adapters.MaxLabelKeyBytes+1): "x"}, false},
		{"long value", map[string]string{"k": strings.Repeat("v", adapters.MaxLabelValueBytes+1)}, false},
		{"key starts with dot", map[string]string{".k": "x"}, false},
		{"key starts with slash", map[string]string{"/k": "x"}, false},
		{"key with space", map[string]string{"a b": "x"}, false},
		{"key with colon", map[string]string{"a:b": "x"}, false},
		{"key non-ascii", map[string]string{"ké": "x"}, false},
		{"value newline", map[string]string{"k": "a\nb"}, false},
		{"value NUL", map[string]string{"k": "a\x00"}, false},
		{"value DEL", map[string]string{"k": "a\x7f"}, false},
		{"value tab", map[string]string{"k": "a\tb"}, false},
		{"value invalid UTF-8", map[string]string{"k": "\xff\xfe"}, false},
		{"value C1 control", map[string]string{"k": "a\u0085b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := adapters.ValidateLabels(tt.labels)
			if tt.ok && err != nil {
				t.Fatalf("got %v", err)
			}
			if !tt.ok && !api.IsCode(err, api.CodeInvalidRequest) {
				t.Fatalf("got %v, want invalid_request", err)
			}
		})
	}
}

func TestIsReservedLabel(t *testing.T) {
	for key, want := range map[string]bool{
		adapters.LabelSandboxID: true, adapters.LabelInstallation: true, adapters.LabelProject: true,
		"differently.dev": false, "x/differently.dev/y": false, "team": false,
	} {
		if got := adapters.IsReservedLabel(key); got != want {
			t.Errorf("IsReservedLabel(%q) = %v", key, got)
		}
	}
}
