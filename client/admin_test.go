package client_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// TestAdmin drives every admin wrapper against a real daemon.
func TestAdmin(t *testing.T) {
	dd := startDaemon(t)
	c := dd.client(t)
	ctx := testCtx(t)

	pools, err := c.ListPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.Name)
	}
	// local is there where the host can run bwrap (server/daemon tests that).
	names = slices.DeleteFunc(names, func(n string) bool { return n == "local" })
	if !slices.Equal(names, []string{"devhost", "fake"}) {
		t.Fatalf("pools: %v", names)
	}

	created, err := c.CreatePool(ctx, client.PoolSpec{
		Name: "extra", Adapter: "fake", MaxConcurrency: ptr(2),
		Config: &map[string]any{"templates": []any{"a", "b"}, "totalCPU": 4},
	})
	if err != nil || created.Name != "extra" || created.MaxConcurrency != 2 {
		t.Fatalf("create pool: %+v, %v", created, err)
	}
	var apiErr *client.APIError
	if _, err := c.CreatePool(ctx, client.PoolSpec{Name: "extra", Adapter: "fake"}); !errors.As(err, &apiErr) ||
		apiErr.Status != http.StatusConflict {
		t.Fatalf("create an existing pool: %v", err)
	}
	if p, err := c.GetPool(ctx, "extra"); err != nil || p.Adapter != "fake" {
		t.Fatalf("get pool: %+v, %v", p, err)
	}
	trust := client.External
	if p, err := c.PutPool(ctx, "extra", client.PoolSpec{Name: "extra", Adapter: "fake", Trust: &trust}); err != nil ||
		p.Trust != client.PoolTrustExternal {
		t.Fatalf("put pool: %+v, %v", p, err)
	}
	// PUT only replaces: a name the daemon does not know is not created.
	if _, err := c.PutPool(ctx, "unknown", client.PoolSpec{Name: "unknown", Adapter: "fake"}); !client.IsNotFound(err) {
		t.Fatalf("put an unknown pool: %v, want a 404", err)
	}
	if p, err := c.PatchPool(ctx, "extra", client.PoolPatch{Region: ptr("eu")}); err != nil ||
		p.Region == nil || *p.Region != "eu" || p.Trust != client.PoolTrustExternal {
		t.Fatalf("patch pool: %+v, %v", p, err)
	}

	pol, err := c.PutPolicy(ctx, client.Policy{AllowExternal: ptr(true), ExternalPools: &[]string{"extra"}})
	if err != nil || pol.AllowExternal == nil || !*pol.AllowExternal {
		t.Fatalf("put policy: %+v, %v", pol, err)
	}
	if pol, err = c.GetPolicy(ctx); err != nil || pol.ExternalPools == nil || !slices.Equal(*pol.ExternalPools, []string{"extra"}) {
		t.Fatalf("get policy: %+v, %v", pol, err)
	}
	report, err := c.GetTrustReport(ctx)
	if err != nil || !report.AllowExternal {
		t.Fatalf("trust report: %+v, %v", report, err)
	}
	receives := map[string]bool{}
	for _, p := range report.Pools {
		receives[p.Name] = p.ReceivesWork
	}
	if !receives["extra"] {
		t.Fatalf("trust report does not let extra receive work: %+v", report.Pools)
	}

	rec, err := c.ReconcileNow(ctx)
	if err != nil || len(rec.Pools) == 0 {
		t.Fatalf("reconcile: %+v, %v", rec, err)
	}

	if err := c.DeletePool(ctx, "extra", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetPool(ctx, "extra"); !client.IsNotFound(err) {
		t.Fatalf("get a deleted pool: %v", err)
	}
	if err := c.DeletePool(ctx, "extra", true); !client.IsNotFound(err) {
		t.Fatalf("delete a deleted pool: %v", err)
	}

	tok, err := c.CreateToken(ctx, client.TokenCreate{Name: ptr("ci"), Scope: client.TokenCreateScopeProject, Project: ptr("default")})
	if err != nil || tok.Secret == "" {
		t.Fatalf("create token: %+v, %v", tok, err)
	}
	toks, err := c.ListTokens(ctx)
	if err != nil || !slices.ContainsFunc(toks, func(x client.Token) bool { return x.Id == tok.Token.Id }) {
		t.Fatalf("list tokens: %+v, %v", toks, err)
	}
	// The project token works for sandboxes but is refused the admin API.
	project, err := client.New(dd.url, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := project.ListSandboxes(ctx, nil); err != nil {
		t.Fatalf("project token lists sandboxes: %v", err)
	}
	if _, err := project.ListPools(ctx); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden ||
		apiErr.Code != api.CodeForbidden {
		t.Fatalf("project token on the admin API: %v", err)
	}
	if err := c.DeleteToken(ctx, tok.Token.Id); err != nil {
		t.Fatal(err)
	}
	if _, err := project.ListSandboxes(ctx, nil); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Fatalf("revoked token: %v", err)
	}
	if err := c.DeleteToken(ctx, tok.Token.Id); !client.IsNotFound(err) {
		t.Fatalf("delete a deleted token: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
