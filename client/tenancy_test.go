package client_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// TestProjects drives the project wrappers against a real daemon: implicit and
// declared projects, a quota that refuses a sandbox, usage, and deletion.
func TestProjects(t *testing.T) {
	dd := startDaemon(t)
	c := dd.client(t)
	ctx := testCtx(t)

	// Any valid name answers, undeclared, with no quota.
	p, err := c.GetProject(ctx, "acme", "ci")
	if err != nil || p.Declared || p.Org != "acme" || p.Name != "ci" || deref(p.Quota.Sandboxes) != 0 || p.CreatedAt != nil {
		t.Fatalf("get an implicit project: %+v, %v", p, err)
	}
	if err := c.DeleteProject(ctx, "acme", "ci"); !client.IsNotFound(err) {
		t.Fatalf("delete an undeclared project: %v", err)
	}
	var apiErr *client.APIError
	if _, err := c.GetProject(ctx, "acme", "bell\x07"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Fatalf("get an invalid project name: %v", err)
	}

	p, err = c.PutProject(ctx, "acme", "ci", client.ProjectSpec{Quota: &client.ProjectQuota{Sandboxes: ptr(1), MemoryMiB: ptr(int64(4096))}})
	if err != nil || !p.Declared || deref(p.Quota.Sandboxes) != 1 || deref(p.Quota.MemoryMiB) != 4096 ||
		p.Quota.Cpu == nil || *p.Quota.Cpu != 0 || p.CreatedAt == nil {
		t.Fatalf("put project: %+v, %v", p, err)
	}
	projects, err := c.ListProjects(ctx)
	if err != nil || !slices.ContainsFunc(projects, func(x client.Project) bool {
		return x.Org == "acme" && x.Name == "ci" && x.Declared
	}) {
		t.Fatalf("list projects: %+v, %v", projects, err)
	}

	// One sandbox fits; a second is refused with quota_exceeded, at once (a 429 that
	// is final, not retried).
	sb, err := c.CreateSandbox(ctx, client.SandboxCreate{
		Org: ptr("acme"), Project: ptr("ci"), Resources: &client.Resources{CPU: 1, MemoryMiB: 512},
		Placement: &client.Placement{AllowedPools: &[]string{"fake"}},
	}, "tenancy-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForState(ctx, sb.Id, client.Running); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSandbox(ctx, client.SandboxCreate{
		Org: ptr("acme"), Project: ptr("ci"), Placement: &client.Placement{AllowedPools: &[]string{"fake"}},
	}, "tenancy-2")
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests || apiErr.Code != api.CodeQuotaExceeded {
		t.Fatalf("a second sandbox over the quota: %v", err)
	}
	if p, err = c.GetProject(ctx, "acme", "ci"); err != nil || p.Usage.Sandboxes != 1 || p.Usage.Cpu != 1 || p.Usage.MemoryMiB != 512 {
		t.Fatalf("usage: %+v, %v", p, err)
	}

	// A project with live sandboxes cannot lose its declaration.
	if err := c.DeleteProject(ctx, "acme", "ci"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Fatalf("delete a project with a live sandbox: %v", err)
	}
	if _, err := c.DeleteSandbox(ctx, sb.Id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForState(ctx, sb.Id, client.Terminated); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteProject(ctx, "acme", "ci"); err != nil {
		t.Fatal(err)
	}
	if p, err = c.GetProject(ctx, "acme", "ci"); err != nil || p.Declared || p.Usage.Sandboxes != 0 {
		t.Fatalf("get a deleted project: %+v, %v", p, err)
	}
}

// TestProfiles drives the profile wrappers, and a sandbox created from a profile.
func TestProfiles(t *testing.T) {
	dd := startDaemon(t)
	c := dd.client(t)
	ctx := testCtx(t)

	if _, err := c.GetProfile(ctx, "ci"); !client.IsNotFound(err) {
		t.Fatalf("get an unknown profile: %v", err)
	}
	p, err := c.PutProfile(ctx, "ci", client.ProfileSpec{
		Capabilities: &[]string{"lifecycle.stop-start", "exec", "exec"},
		Resources:    &client.Resources{CPU: 2, MemoryMiB: 1024},
		Placement:    &client.Placement{AllowedPools: &[]string{"fake"}},
		TtlSeconds:   ptr(int64(600)),
	})
	if err != nil || !slices.Equal(p.Capabilities, []string{"exec", "lifecycle.stop-start"}) ||
		p.Resources.CPU != 2 || p.TtlSeconds != 600 || p.Placement == nil || !slices.Equal(deref(p.Placement.AllowedPools), []string{"fake"}) {
		t.Fatalf("put profile: %+v, %v", p, err)
	}
	var apiErr *client.APIError
	if _, err := c.PutProfile(ctx, "Bad_Name", client.ProfileSpec{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Fatalf("put a profile with an invalid name: %v", err)
	}
	if got, err := c.GetProfile(ctx, "ci"); err != nil || got.Name != "ci" || got.Resources.MemoryMiB != 1024 {
		t.Fatalf("get profile: %+v, %v", got, err)
	}
	if _, err := c.PutProfile(ctx, "aaa", client.ProfileSpec{Template: ptr("alpine")}); err != nil {
		t.Fatal(err)
	}
	profiles, err := c.ListProfiles(ctx)
	if err != nil || len(profiles) != 2 || profiles[0].Name != "aaa" || profiles[1].Name != "ci" || deref(profiles[0].Template) != "alpine" {
		t.Fatalf("list profiles: %+v, %v", profiles, err)
	}

	// A sandbox naming the profile gets its capabilities, resources, placement and TTL.
	sb, err := c.CreateSandbox(ctx, client.SandboxCreate{Profile: ptr("ci")}, "profiled")
	if err != nil {
		t.Fatal(err)
	}
	if sb, err = c.WaitForState(ctx, sb.Id, client.Running); err != nil {
		t.Fatal(err)
	}
	if deref(sb.Profile) != "ci" || deref(sb.Pool) != "fake" || deref(sb.TtlSeconds) != 600 || sb.Resources.CPU != 2 ||
		!slices.Contains(sb.Capabilities, "lifecycle.stop-start") {
		t.Fatalf("sandbox from a profile: %+v", sb)
	}

	if err := c.DeleteProfile(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetProfile(ctx, "ci"); !client.IsNotFound(err) {
		t.Fatalf("get a deleted profile: %v", err)
	}
	if err := c.DeleteProfile(ctx, "ci"); !client.IsNotFound(err) {
		t.Fatalf("delete a deleted profile: %v", err)
	}
	// The sandbox keeps what the profile gave it.
	if got, err := c.GetSandbox(ctx, sb.Id); err != nil || deref(got.Profile) != "ci" || deref(got.TtlSeconds) != 600 {
		t.Fatalf("sandbox after its profile was deleted: %+v, %v", got, err)
	}
	if _, err := c.CreateSandbox(ctx, client.SandboxCreate{Profile: ptr("ci")}, "profiled-2"); !errors.As(err, &apiErr) ||
		apiErr.Code != api.CodeInvalidRequest {
		t.Fatalf("create from a deleted profile: %v", err)
	}

	// A project token is refused the admin calls.
	tok, err := c.CreateToken(ctx, client.TokenCreate{Scope: client.TokenCreateScopeProject, Project: ptr("default")})
	if err != nil {
		t.Fatal(err)
	}
	project, err := client.New(dd.url, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := project.ListProfiles(ctx); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Fatalf("project token lists profiles: %v", err)
	}
	if _, err := project.ListProjects(ctx); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Fatalf("project token lists projects: %v", err)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
