package sandboxes_test

import (
	"context"
	"slices"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

func TestPutProfile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        store.Profile
		code     api.Code
		wantCaps []string
	}{
		{name: "capabilities sorted once", p: store.Profile{Name: "gpu", Capabilities: []string{"exec.stream", "files", "exec.stream"},
			Placement: store.Placement{AllowedPools: []string{"future-pool"}}},
			wantCaps: []string{"exec.stream", "files"}},
		{name: "no capabilities", p: store.Profile{Name: "plain", TTLSeconds: 60}},
		{name: "bad name", p: store.Profile{Name: "Not A Profile"}, code: api.CodeInvalidRequest},
		{name: "unknown capability", p: store.Profile{Name: "gpu", Capabilities: []string{"teleport"}}, code: api.CodeInvalidRequest},
		{name: "isolation.none", p: store.Profile{Name: "gpu", Capabilities: []string{"isolation.none"}}, code: api.CodeInvalidRequest},
		{name: "bad allowed pool", p: store.Profile{Name: "gpu", Placement: store.Placement{AllowedPools: []string{"fake", "Bad_Pool"}}},
			code: api.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			ctx := context.Background()
			got, err := f.svc.PutProfile(ctx, tc.p)
			if tc.code != "" {
				if !api.IsCode(err, tc.code) {
					t.Fatalf("err = %v, want %s", err, tc.code)
				}
				if _, err := f.st.GetProfile(ctx, tc.p.Name); !api.IsCode(err, api.CodeNotFound) {
					t.Fatalf("refused profile stored: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stored, err := f.st.GetProfile(ctx, tc.p.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []store.Profile{got, stored} {
				if !slices.Equal(p.Capabilities, tc.wantCaps) || p.TTLSeconds != tc.p.TTLSeconds ||
					!slices.Equal(p.Placement.AllowedPools, tc.p.Placement.AllowedPools) || !p.CreatedAt.Equal(f.clk.Now()) {
					t.Fatalf("profile %+v", p)
				}
			}
		})
	}
}

func TestValidPoolName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"fake", true},
		{"eu-west-1", true},
		{"", false},
		{"Upper", false},
		{"-dash", false},
		{"under_score", false},
	} {
		if err := sandboxes.ValidPoolName(tc.name); (err == nil) != tc.ok || err != nil && !api.IsCode(err, api.CodeInvalidRequest) {
			t.Errorf("ValidPoolName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
