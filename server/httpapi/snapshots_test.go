package httpapi_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// GET /v1/snapshots lists the snapshots a token may see, oldest first, a page at a
// time: a project token its own project's whatever project it names, an admin every
// project's or one project's (org/project, or a name in any organisation), either
// of them one sandbox's alone.
func TestSnapshotListing(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		a, b, other := e.projectToken("acme", "a"), e.projectToken("acme", "b"), e.projectToken("other", "a")
		sandboxOf := map[string]string{}
		snap := func(tok string) string {
			t.Helper()
			sb := e.running(tok, "fake")
			var sn httpapi.Snapshot
			e.do(tok, "POST", "/v1/sandboxes/"+sb.ID+"/snapshots", map[string]any{}).want(t, http.StatusCreated).decode(t, &sn)
			sandboxOf[sn.Id] = sb.ID
			return sn.Id
		}
		a1, a2, b1, o1 := snap(a), snap(a), snap(b), snap(other)
		sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
		list := func(tok, query string) ([]string, string) {
			t.Helper()
			var page httpapi.SnapshotList
			e.do(tok, "GET", "/v1/snapshots?"+query, nil).want(t, http.StatusOK).decode(t, &page)
			var got []string
			for _, sn := range page.Items {
				got = append(got, sn.Id)
			}
			return got, deref(page.NextCursor)
		}
		for _, tc := range []struct {
			who, tok, query string
			want            []string
		}{
			{"a", a, "", sorted(a1, a2)},
			{"a", a, "project=a", sorted(a1, a2)},
			{"a", a, "project=acme/a", sorted(a1, a2)},
			{"a", a, "project=b", nil},
			{"a", a, "project=acme/b", nil},
			{"a", a, "project=other/a", nil},
			{"a", a, "sandbox=" + sandboxOf[b1], nil},
			{"a", a, "sandbox=" + sandboxOf[a2], []string{a2}},
			{"b", b, "", []string{b1}},
			{"admin", e.admin, "", sorted(a1, a2, b1, o1)},
			{"admin", e.admin, "project=acme/a", sorted(a1, a2)},
			{"admin", e.admin, "project=a", sorted(a1, a2, o1)},
			{"admin", e.admin, "project=other/a", []string{o1}},
			{"admin", e.admin, "sandbox=" + sandboxOf[b1], []string{b1}},
		} {
			if got, next := list(tc.tok, tc.query); !slices.Equal(got, tc.want) || next != "" {
				t.Errorf("%s lists ?%s: %v (next %q), want %v", tc.who, tc.query, got, next, tc.want)
			}
		}
		var paged []string
		query := "limit=1"
		for range 5 {
			got, next := list(e.admin, query)
			paged = append(paged, got...)
			if next == "" {
				break
			}
			query = "limit=1&cursor=" + next
		}
		if want := sorted(a1, a2, b1, o1); !slices.Equal(paged, want) {
			t.Errorf("one at a time: %v, want %v", paged, want)
		}
		for _, q := range []string{"limit=0", "limit=1001", "limit=x", "cursor=bogus"} {
			e.do(e.admin, "GET", "/v1/snapshots?"+q, nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
		e.do("", "GET", "/v1/snapshots", nil).want(t, http.StatusUnauthorized, api.CodeUnauthenticated)
	})
}
