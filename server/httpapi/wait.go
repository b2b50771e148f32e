package httpapi

import (
	"net/http"
	"slices"
	"time"

	"github.com/different-ai/differently/server/store"
)

// defaultWaitSeconds is how long a wait lasts when the request names no timeout.
const defaultWaitSeconds = 30

// WaitSandbox answers once the sandbox is in one of the requested states or a
// terminal one, or when the timeout passes, or at once when the replica is stopping.
// Each wake-up of the change feed makes it read the sandbox again: the feed says
// that something changed, the row says what.
func (s *Server) WaitSandbox(w http.ResponseWriter, r *http.Request, id SandboxID, params WaitSandboxParams) {
	want, err := parseStates(params.State)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(want) == 0 {
		s.writeError(w, r, invalid("name at least one state to wait for"))
		return
	}
	secs := defaultWaitSeconds
	if params.TimeoutSeconds != nil {
		secs = *params.TimeoutSeconds
	}
	if secs < 0 || secs > 60 {
		s.writeError(w, r, invalid("timeoutSeconds must be between 0 and 60"))
		return
	}
	ctx := r.Context()
	// Only a change into a state that would end the wait is worth a read; the
	// states passed through on the way (provisioning, say) are not.
	sub := s.changes.Sandbox(id, func(st store.State) bool { return slices.Contains(want, st) || st.IsTerminal() })
	defer sub.Close()
	timeout := time.NewTimer(time.Duration(secs) * time.Second)
	defer timeout.Stop()
	for last := secs == 0; ; {
		sb, err := s.loadSandbox(ctx, id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if last || slices.Contains(want, sb.State) || sb.State.IsTerminal() {
			writeJSON(w, http.StatusOK, s.toSandbox(sb))
			return
		}
		select {
		case <-sub.C:
		case <-timeout.C:
			last = true
		case <-s.changes.Closed():
			last = true
		case <-ctx.Done():
			return // the client left: nobody reads an answer
		}
	}
}
