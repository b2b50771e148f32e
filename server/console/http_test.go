package console_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
)

// The console's security properties, checked over plain HTTP against a real
// daemon: headers, cookies, sign-in, CSRF, tenancy, sign-out, and that no token ever
// shows in a URL or a page.
func TestConsoleHTTP(t *testing.T) {
	dd := startDaemon(t)
	projA := dd.projectToken(t, "alpha")
	projB := dd.projectToken(t, "beta")
	sbA := dd.sandbox(t, "alpha", map[string]string{"team": "red"})
	sbB := dd.sandbox(t, "beta", nil)

	t.Run("headers", func(t *testing.T) {
		b := newBrowser(t, dd.url)
		for _, path := range []string{"/ui/signin", "/ui/static/console.js", "/ui/nowhere", "/ui/sandboxes"} {
			resp, _ := b.get(path)
			h := resp.Header
			csp := h.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("%s: CSP %q lacks %q", path, csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") {
				t.Errorf("%s: CSP %q allows inline code", path, csp)
			}
			for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
				"Referrer-Policy": "same-origin"} {
				if got := h.Get(k); got != want {
					t.Errorf("%s: %s = %q, want %q", path, k, got, want)
				}
			}
		}
		// Nothing inline: every script and style sheet is a file of this origin.
		_, page := b.get("/ui/signin")
		if strings.Contains(page, "<script>") || strings.Contains(page, "<style") || strings.Contains(page, "style=") {
			t.Errorf("the sign-in page has inline script or style:\n%s", page)
		}
	})

	t.Run("signin", func(t *testing.T) {
		b := newBrowser(t, dd.url)
		if resp, _ := b.get("/ui/sandboxes"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/signin" {
			t.Fatalf("signed out: %d %s, want a redirect to the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
		}
		for _, bad := range []string{"", "dly_notatoken", dd.token + "x"} {
			resp, body := b.post("/ui/signin", url.Values{"token": {bad}})
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "That token was not accepted") {
				t.Errorf("token %q: %d\n%s", bad, resp.StatusCode, body)
			}
			if len(resp.Cookies()) != 0 {
				t.Errorf("token %q: a refused sign-in set cookies %v", bad, resp.Cookies())
			}
		}
		// A sign-in posted from another site is refused before the token is looked at.
		resp, _ := b.do(http.MethodPost, "/ui/signin", url.Values{"token": {dd.token}}, "http://evil.example")
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("cross-origin sign-in: %d, cookies %v", resp.StatusCode, resp.Cookies())
		}
		resp, _ = b.post("/ui/signin", url.Values{"token": {dd.token}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", resp.StatusCode)
		}
		cookies := resp.Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies %v, want the session's", cookies)
		}
		ck := cookies[0]
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" {
			t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui", ck)
		}
		if strings.Contains(ck.Value, dd.token) || len(ck.Value) < 40 {
			t.Errorf("session cookie %q is not a random ID", ck.Value)
		}
		if resp, body := b.get("/ui/sandboxes"); resp.StatusCode != http.StatusOK || !strings.Contains(body, sbA.Id) ||
			!strings.Contains(body, sbB.Id) || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("admin list: %d %q, want both sandboxes\n%s", resp.StatusCode, resp.Header.Get("Cache-Control"), body)
		}
		// Sign-out ends the session on the server: the old cookie is worth nothing.
		csrf := b.csrf()
		if resp, _ := b.post("/ui/signout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-out: %d", resp.StatusCode)
		}
		replay := newBrowser(t, dd.url)
		u, _ := url.Parse(dd.url + "/ui/")
		replay.hc.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/ui"}})
		if resp, _ := replay.get("/ui/sandboxes"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("the signed-out session's cookie still answers %d", resp.StatusCode)
		}
		if resp, _ := replay.get("/ui/sandboxes/rows"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a fragment without a session: %d, want 401", resp.StatusCode)
		}
	})

	t.Run("revoked token", func(t *testing.T) {
		project := "delta"
		org := "default"
		tok, err := dd.c.CreateToken(t.Context(), client.TokenCreate{Scope: "project", Org: &org, Project: &project})
		if err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, dd.url)
		b.signIn(tok.Secret)
		if resp, _ := b.get("/ui/sandboxes"); resp.StatusCode != http.StatusOK {
			t.Fatalf("signed in: %d", resp.StatusCode)
		}
		// A token deleted through the API ends its sessions at their next request.
		if err := dd.c.DeleteToken(t.Context(), tok.Token.Id); err != nil {
			t.Fatal(err)
		}
		if resp, _ := b.get("/ui/sandboxes"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/signin" {
			t.Errorf("after the token's deletion: %d %s, want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp, _ := b.get("/ui/sandboxes/rows"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a fragment after the token's deletion: %d, want 401", resp.StatusCode)
		}
	})

	t.Run("csrf", func(t *testing.T) {
		b := newBrowser(t, dd.url)
		b.signIn(projA)
		csrf := b.csrf()
		stop := "/ui/sandboxes/" + sbA.Id + "/stop"
		for name, tc := range map[string]struct {
			form   url.Values
			origin string
		}{
			"no token":      {url.Values{}, dd.url},
			"wrong token":   {url.Values{"csrf": {csrf + "x"}}, dd.url},
			"other origin":  {url.Values{"csrf": {csrf}}, "http://evil.example"},
			"no origin":     {url.Values{"csrf": {csrf}}, ""},
			"other port":    {url.Values{"csrf": {csrf}}, "http://127.0.0.1:1"},
			"https variant": {url.Values{"csrf": {csrf}}, strings.Replace(dd.url, "http:", "https:", 1)},
		} {
			resp, _ := b.do(http.MethodPost, stop, tc.form, tc.origin)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", name, resp.StatusCode)
			}
		}
		sb, err := dd.c.GetSandbox(t.Context(), sbA.Id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State != "running" {
			t.Fatalf("a refused POST changed the sandbox: %s", sb.State)
		}
		// The same POST with the session's token, from this origin, is carried out.
		if resp, body := b.post(stop, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("stop: %d\n%s", resp.StatusCode, body)
		}
		if sb, err = dd.c.GetSandbox(t.Context(), sbA.Id); err != nil || sb.State != "stopped" {
			t.Fatalf("after stop: %v %v", sb, err)
		}
		// Another session's CSRF token is no good here.
		other := newBrowser(t, dd.url)
		other.signIn(projA)
		if resp, _ := b.post("/ui/sandboxes/"+sbA.Id+"/ttl", url.Values{"csrf": {other.csrf()}, "ttl": {"60"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("another session's CSRF token: %d, want 403", resp.StatusCode)
		}
	})

	t.Run("tenancy", func(t *testing.T) {
		b := newBrowser(t, dd.url)
		b.signIn(projB)
		_, list := b.get("/ui/sandboxes")
		if strings.Contains(list, sbA.Id) || !strings.Contains(list, sbB.Id) {
			t.Errorf("project beta's list: want its own sandbox only\n%s", list)
		}
		// Asking for another project by filter finds nothing, as on the API.
		if _, rows := b.get("/ui/sandboxes/rows?project=default/alpha"); strings.Contains(rows, sbA.Id) {
			t.Errorf("a project filter showed another project's sandbox")
		}
		csrf := b.csrf()
		for _, path := range []string{"/ui/sandboxes/" + sbA.Id, "/ui/sandboxes/" + sbA.Id + "/live",
			"/ui/sandboxes/" + sbA.Id + "/confirm/delete", "/ui/sandboxes/nosuch"} {
			resp, body := b.get(path)
			if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "alpha") {
				t.Errorf("GET %s: %d, want 404 without the other project's name\n%s", path, resp.StatusCode, body)
			}
		}
		resp, _ := b.post("/ui/sandboxes/"+sbA.Id+"/delete", url.Values{"csrf": {csrf}})
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("delete of another project's sandbox: %d, want 404", resp.StatusCode)
		}
		if sb, err := dd.c.GetSandbox(t.Context(), sbA.Id); err != nil || sb.State == "terminating" || sb.State == "terminated" {
			t.Errorf("another project deleted alpha's sandbox: %v %v", sb, err)
		}
		for _, path := range []string{"/ui/pools", "/ui/pools/live", "/ui/trust", "/ui/reconcile"} {
			if resp, _ := b.get(path); resp.StatusCode != http.StatusForbidden {
				t.Errorf("project token GET %s: %d, want 403", path, resp.StatusCode)
			}
		}
		if resp, _ := b.post("/ui/reconcile", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("project token reconcile: %d, want 403", resp.StatusCode)
		}
	})

	t.Run("admin pages", func(t *testing.T) {
		b := newBrowser(t, dd.url)
		b.signIn(dd.token)
		for path, want := range map[string][]string{
			"/ui/pools":                      {"fake", "devhost", "healthy"},
			"/ui/trust":                      {"fake", "Receives work"},
			"/ui/reconcile":                  {"Reconcile now"},
			"/ui/sandboxes?label=team%3Dred": {sbA.Id},
			"/ui/sandboxes/" + sbB.Id:        {"created", "placed", "running", "fake"},
			"/ui/sandboxes/" + sbB.Id + "/confirm/ttl?ttl=2h": {"2h0m0s"},
		} {
			resp, body := b.get(path)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d\n%s", path, resp.StatusCode, body)
				continue
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s lacks %q", path, w)
				}
			}
		}
		if _, body := b.get("/ui/sandboxes?label=team%3Dblue"); strings.Contains(body, sbA.Id) {
			t.Errorf("the label filter kept a sandbox without the label")
		}
		if resp, _ := b.get("/ui/sandboxes?state=bogus"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("unknown state filter: %d, want 400", resp.StatusCode)
		}
		// Passes another replica recorded, a periodic one with repairs and errors,
		// then enough to fill a page, and then one asked for here.
		st := dd.store(t)
		now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
		elsewhere := store.ReconcilePass{StartedAt: now, EndedAt: now, Replica: "r-elsewhere", Trigger: store.TriggerPeriodic,
			Pools: []store.ReconcilePoolReport{{Pool: "fake", Adopted: []string{"sbx_adopted1"}, Errors: []string{"delete ref-9: refused"}}}}
		if _, err := st.RecordReconcilePass(t.Context(), elsewhere, 0); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			filler := store.ReconcilePass{StartedAt: now, EndedAt: now, Replica: "r-filler", Trigger: store.TriggerPeriodic}
			if _, err := st.RecordReconcilePass(t.Context(), filler, 0); err != nil {
				t.Fatal(err)
			}
		}
		csrf := b.csrf()
		if resp, body := b.post("/ui/reconcile", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("reconcile: %d\n%s", resp.StatusCode, body)
		}
		toks, err := dd.c.ListTokens(t.Context())
		if err != nil || len(toks) == 0 {
			t.Fatalf("tokens %v %v", toks, err)
		}
		adminID := ""
		for _, tok := range toks {
			if tok.Scope == "admin" {
				adminID = tok.Id
			}
		}
		_, body := b.get("/ui/reconcile")
		for _, want := range []string{"on demand, token:" + adminID, `data-trigger="on_demand"`, `data-pool="fake"`, "r-filler", `id="older-passes"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the reconcile page lacks %q:\n%s", want, body)
			}
		}
		if strings.Index(body, "on demand, token:") > strings.Index(body, "r-filler") {
			t.Errorf("the pass asked for is not shown first:\n%s", body)
		}
		if strings.Contains(body, "r-elsewhere") {
			t.Errorf("the first page shows more than %d passes", 20)
		}
		older := body[strings.Index(body, `href="/ui/reconcile?cursor=`)+len(`href="`):]
		older = html.UnescapeString(older[:strings.Index(older, `"`)])
		_, body = b.get(older)
		for _, want := range []string{"r-elsewhere", "periodic, the leader", "sbx_adopted1", "delete ref-9: refused", `id="newest-passes"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the older passes lack %q:\n%s", want, body)
			}
		}
		if resp, _ := b.get("/ui/reconcile?cursor=nope"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a bad cursor: %d, want 400", resp.StatusCode)
		}
		// While another replica is in a pass, asking for one runs nothing, says why,
		// and records nothing. The daemon's leader holds the pass lease only for the
		// moment of its own pass: take it once that pass has ended.
		took := false
		for range 1000 {
			won, err := st.TryLease(t.Context(), reconcile.PassLeaseName, "r-elsewhere", time.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if took = won; took {
				break
			}
		}
		if !took {
			t.Fatal("the pass lease stayed held by the daemon")
		}
		before, _, err := st.ListReconcilePasses(t.Context(), store.ReconcilePassFilter{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := b.post("/ui/reconcile", url.Values{"csrf": {csrf}})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, `id="reconcile-failed"`) ||
			!strings.Contains(body, "another replica") {
			t.Errorf("reconcile beside another replica's pass: %d\n%s", resp.StatusCode, body)
		}
		after, _, err := st.ListReconcilePasses(t.Context(), store.ReconcilePassFilter{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if before[0].ID != after[0].ID {
			t.Errorf("a pass that did not run was recorded: %+v", after[0])
		}
		if err := st.ReleaseLease(t.Context(), reconcile.PassLeaseName, "r-elsewhere"); err != nil {
			t.Fatal(err)
		}
		if resp, _ := b.post("/ui/sandboxes/"+sbB.Id+"/ttl", url.Values{"csrf": {csrf}, "ttl": {"7200"}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("ttl: %d", resp.StatusCode)
		}
		if sb, err := dd.c.GetSandbox(t.Context(), sbB.Id); err != nil || sb.TtlSeconds == nil || *sb.TtlSeconds != 7200 {
			t.Errorf("after the TTL action: %v %v", sb, err)
		}
		if resp, _ := b.post("/ui/sandboxes/"+sbB.Id+"/ttl", url.Values{"csrf": {csrf}, "ttl": {"-5"}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("negative TTL: %d, want 400", resp.StatusCode)
		}
		if resp, _ := b.post("/ui/sandboxes/"+sbB.Id+"/explode", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("unknown action: %d, want 404", resp.StatusCode)
		}
		// Every page and redirect of this session, with the token nowhere in them.
		for _, u := range b.urls {
			if strings.Contains(u, dd.token) {
				t.Errorf("the token appears in URL %s", u)
			}
		}
		for _, page := range b.bodies {
			if strings.Contains(page, dd.token) || strings.Contains(page, projA) || strings.Contains(page, projB) {
				t.Errorf("a token appears in a page:\n%s", page)
			}
		}
	})
}
