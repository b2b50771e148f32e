package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/changes"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// readSignal is a store that reports each GetSandbox once it has read the row, so a
// test can change the sandbox after the wait route's first look and know that only
// the change feed can end the wait.
type readSignal struct {
	store.Store
	read chan string
}

func (s readSignal) GetSandbox(ctx context.Context, id string) (store.Sandbox, error) {
	sb, err := s.Store.GetSandbox(ctx, id)
	select {
	case s.read <- string(sb.State):
	default:
	}
	return sb, err
}

func TestWaitSandbox(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		sig := readSignal{Store: st, read: make(chan string, 1)}
		// No recheck within the test: only the feed can end a wait early.
		e := newEnvWith(t, sig, func(o *httpapi.Options) { o.WaitRecheck = time.Hour })
		sb := e.createSandbox(e.admin, "fake", nil)
		path := "/v1/sandboxes/" + sb.Id + "/wait"
		decode := func(r response) httpapi.Sandbox {
			var out httpapi.Sandbox
			r.want(t, http.StatusOK).decode(t, &out)
			return out
		}
		drain := func() {
			select {
			case <-sig.read:
			default:
			}
		}

		// Already in a wanted state: at once.
		if got := decode(e.do(e.admin, "GET", path+"?state=queued,running", nil)); got.State != httpapi.Queued {
			t.Fatalf("wait for queued answered %s", got.State)
		}
		// timeoutSeconds=0: the state as it is.
		if got := decode(e.do(e.admin, "GET", path+"?state=running&timeoutSeconds=0", nil)); got.State != httpapi.Queued {
			t.Fatalf("a wait of 0 s answered %s", got.State)
		}

		// A change made after the route's first read ends the wait: the feed woke it.
		// The test's deadline, not the 60 s timeout, bounds a broken wake-up, and the
		// answer would then still say queued.
		drain()
		answer := make(chan response, 1)
		go func() { answer <- e.do(e.admin, "GET", path+"?state=running&timeoutSeconds=60", nil) }()
		if st := <-sig.read; st != "queued" {
			t.Fatalf("first read saw %s", st)
		}
		e.provision(sb.Id)
		if got := decode(<-answer); got.State != httpapi.Running {
			t.Fatalf("wait for running answered %s", got.State)
		}

		// A terminal state ends a wait for another state: it can never be reached.
		drain()
		go func() { answer <- e.do(e.admin, "GET", path+"?state=stopped&timeoutSeconds=60", nil) }()
		<-sig.read
		if _, err := st.UpdateSandbox(t.Context(), sb.Id, e.clk.Now(), func(cur *store.Sandbox) error {
			cur.State = store.StateFailed
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := decode(<-answer); got.State != httpapi.Failed {
			t.Fatalf("wait for stopped answered %s after the sandbox failed", got.State)
		}

		// Bad requests, and another project's sandbox, which is not there for it.
		e.do(e.admin, "GET", path, nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "GET", path+"?state=bogus", nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "GET", path+"?state=running&timeoutSeconds=61", nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "GET", path+"?state=running&timeoutSeconds=-1", nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		other := e.projectToken("default", "other")
		missing := e.do(other, "GET", "/v1/sandboxes/sbx_missing/wait?state=running&timeoutSeconds=0", nil).want(t, http.StatusNotFound, api.CodeNotFound)
		hidden := e.do(other, "GET", path+"?state=running&timeoutSeconds=0", nil).want(t, http.StatusNotFound, api.CodeNotFound)
		if m, h := missing.apiError(t).Message, hidden.apiError(t).Message; len(m) == 0 || len(h) == 0 {
			t.Fatalf("404s without messages: %q, %q", m, h)
		}
	})
}

// A change nobody announced (its replica died between the commit and the NOTIFY)
// still ends a wait: the wait reads the sandbox again every WaitRecheck. The hub
// here hears nothing at all.
func TestWaitRechecksWithoutWakeUp(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		sig := readSignal{Store: st, read: make(chan string, 1)}
		e := newEnvWith(t, sig, func(o *httpapi.Options) {
			o.Changes = changes.New()
			o.WaitRecheck = 10 * time.Millisecond
		})
		sb := e.createSandbox(e.admin, "fake", nil)
		select {
		case <-sig.read:
		default:
		}
		// The client gives up long before the wait's 60 s, whose end would also find
		// the sandbox running: only a recheck answers in time.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/sandboxes/"+sb.Id+"/wait?state=running&timeoutSeconds=60", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e.admin)
		type answer struct {
			sb  httpapi.Sandbox
			err error
		}
		answers := make(chan answer, 1)
		go func() {
			var a answer
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			a.err = json.NewDecoder(resp.Body).Decode(&a.sb)
			answers <- a
		}()
		if st := <-sig.read; st != "queued" {
			t.Fatalf("first read saw %s", st)
		}
		e.provision(sb.Id)
		got := <-answers
		if got.err != nil || got.sb.State != httpapi.Running {
			t.Fatalf("wait answered %s, %v", got.sb.State, got.err)
		}
	})
}
