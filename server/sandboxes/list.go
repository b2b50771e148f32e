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
	if !c.Admin {
		if f.Project != "" && f.Project != c.Project || f.Org != "" && f.Org != c.Org {
			return nil, "", nil
		}
		f.Org, f.Project = c.Org, c.Project
	}
	return s.st.ListSandboxes(ctx, f)
}
