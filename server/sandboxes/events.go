package sandboxes

import (
	"context"

	"github.com/different-ai/differently/server/store"
)

// Events returns one page of sandbox id's history (f's Org, Project and SandboxID
// are set from the sandbox) and the cursor after it. Another project's sandbox is
// not found, as in Sandbox.
func (s *Service) Events(ctx context.Context, c Caller, id string, f store.EventFilter) ([]store.Event, string, error) {
	sb, err := s.Sandbox(ctx, c, id)
	if err != nil {
		return nil, "", err
	}
	f.Org, f.Project, f.SandboxID = sb.Org, sb.Project, sb.ID
	return s.st.ListEvents(ctx, f)
}
