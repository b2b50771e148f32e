package sandboxes

import (
	"context"

	"github.com/different-ai/differently/server/store"
)

// List returns one page of the sandboxes the caller may see that match f, and the
// cursor of the next page ("" after the last). A project token sees its own project
// only: f's Org and Project are set to the caller's, and a filter naming another
// project finds nothing, as a project without sandboxes would. An admin's filter is
// taken as it is. Every API that lists sandboxes (server/httpapi, server/e2b) comes
// through here, so tenancy is decided once.
func (s *Service) List(ctx context.Context, c Caller, f store.SandboxFilter) ([]store.Sandbox, string, error) {
	if !confine(c, &f.Org, &f.Project) {
		return nil, "", nil
	}
	return s.st.ListSandboxes(ctx, f)
}

// SnapshotPage returns a page of the snapshots c may see, as List does sandboxes.
func (s *Service) SnapshotPage(ctx context.Context, c Caller, f store.SnapshotFilter) ([]store.Snapshot, string, error) {
	if !confine(c, &f.Org, &f.Project) {
		return nil, "", nil
	}
	return s.st.ListSnapshotPage(ctx, f)
}

// confine sets a listing's organisation and project to a project token's own. It
// is false when the listing named another project, which then looks like one with
// nothing in it.
func confine(c Caller, org, project *string) bool {
	if c.Admin {
		return true
	}
	if *project != "" && *project != c.Project || *org != "" && *org != c.Org {
		return false
	}
	*org, *project = c.Org, c.Project
	return true
}
