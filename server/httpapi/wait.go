package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// defaultWaitSeconds is how long a wait lasts when the request names no timeout.
const defaultWaitSeconds = 30

// DefaultWaitRecheck is how often a wait reads its sandbox again when no wake-up
// came (Options.WaitRecheck).
const DefaultWaitRecheck = 5 * time.Second

// maxWaitSeconds bounds every wait: the wait route's timeoutSeconds and a Prefer
// header's wait.
const maxWaitSeconds = 60

// WaitSandbox answers once the sandbox is in one of the requested states or a
// terminal one, or when the timeout passes, or at once when the replica is stopping.
func (s *Server) WaitSandbox(w http.ResponseWriter, r *http.Request, id SandboxID, params WaitSandboxParams) {
	want, err := parseStates(params.State)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(want) == 0 {
		s.writeError(w, r, apierr.Invalid("name at least one state to wait for"))
		return
	}
	secs := defaultWaitSeconds
	if params.TimeoutSeconds != nil {
		secs = *params.TimeoutSeconds
	}
	if secs < 0 || secs > maxWaitSeconds {
		s.writeError(w, r, apierr.Invalid("timeoutSeconds must be between 0 and %d", maxWaitSeconds))
		return
	}
	sb, ok, err := s.await(r.Context(), callerOf(r.Context()), id, want, time.Duration(secs)*time.Second, nil, nil)
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case ok:
		writeJSON(w, http.StatusOK, s.toSandbox(sb))
	}
}

// await waits up to timeout for sandbox id to be in one of want or a terminal
// state, and returns it as it is then, read as caller c. ok is false when the client left first
// (nobody reads an answer). The wait ends at once when the replica is stopping.
//
// known, when set, is the sandbox as the caller last saw it; done, when set,
// delivers the outcome of direct work on the sandbox (scheduler.Start, Delete) and
// is waited on first, since it answers without a read. Otherwise, and when done
// closes without a final state, each wake-up of the change feed makes await read
// the sandbox again: the feed says that something changed, the row says what.
func (s *Server) await(ctx context.Context, c sandboxes.Caller, id string, want []store.State, timeout time.Duration, known *store.Sandbox, done <-chan store.Sandbox) (store.Sandbox, bool, error) {
	ends := func(st store.State) bool { return slices.Contains(want, st) || st.IsTerminal() }
	if known != nil && (ends(known.State) || timeout <= 0) {
		return *known, true, nil
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// Only a change into a state that would end the wait is worth a read; the
	// states passed through on the way (provisioning, say) are not. Subscribe before
	// reading, so that no change between the two is missed.
	sub := s.changes.Sandbox(id, ends)
	defer sub.Close()
	recheck := time.NewTicker(s.recheck)
	defer recheck.Stop()
	// While direct work is under way its outcome is awaited alone: it comes without
	// a read. The feed and the recheck take over when it brings no final state.
	wake, again := sub.C, recheck.C
	if done != nil {
		wake, again = nil, nil
	}
	last := timeout <= 0
	for read := done == nil; ; read = true {
		if read {
			sb, err := s.svc.Sandbox(ctx, c, id)
			if err != nil {
				return store.Sandbox{}, false, err
			}
			if last || ends(sb.State) {
				return sb, true, nil
			}
		}
		select {
		case sb, ok := <-done:
			if ok && ends(sb.State) {
				return sb, true, nil
			}
			done, wake, again = nil, sub.C, recheck.C
		case <-wake:
		case <-again:
			// A change whose NOTIFY was never sent (its replica died first) wakes
			// nobody; the read finds it.
		case <-timer.C:
			last = true
		case <-s.changes.Closed():
			last = true
		case <-ctx.Done():
			return store.Sandbox{}, false, nil // the client left: nobody reads an answer
		}
	}
}

// preferWait reads the wait preference of an RFC 7240 Prefer header: -1 when there
// is none, the seconds asked for otherwise. Other preferences are ignored; a wait
// that is not a whole number of seconds from 0 to maxWaitSeconds is invalid.
func preferWait(header *Prefer) (int, error) {
	if header == nil {
		return -1, nil
	}
	for pref := range strings.SplitSeq(*header, ",") {
		// A preference's parameters follow its value after ';'; wait takes none.
		name, value, _ := strings.Cut(strings.TrimSpace(strings.SplitN(pref, ";", 2)[0]), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "wait") {
			continue
		}
		value = strings.Trim(strings.TrimSpace(value), `"`)
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 || n > maxWaitSeconds || strings.HasPrefix(value, "+") {
			return 0, apierr.Invalid("Prefer: wait must be a whole number of seconds from 0 to %d, not %q", maxWaitSeconds, value)
		}
		return n, nil
	}
	return -1, nil
}

// applyWait waits as a Prefer header asked (secs from preferWait) for the sandbox a
// create or delete just wrote (sb) to reach want, and writes the answer with
// status. It writes nothing when the client left.
func (s *Server) applyWait(w http.ResponseWriter, r *http.Request, status, secs int, sb store.Sandbox, want store.State, done <-chan store.Sandbox) {
	if secs < 0 {
		writeJSON(w, status, s.toSandbox(sb))
		return
	}
	out, ok, err := s.await(r.Context(), callerOf(r.Context()), sb.ID, []store.State{want}, time.Duration(secs)*time.Second, &sb, done)
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case ok:
		w.Header().Set("Preference-Applied", fmt.Sprintf("wait=%d", secs))
		writeJSON(w, status, s.toSandbox(out))
	}
}
