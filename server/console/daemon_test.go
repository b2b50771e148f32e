package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/daemon/daemontest"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

// devDaemon is a development daemon (SQLite, the devhost and fake pools) serving on
// loopback for one test, in this process, with its console on.
type devDaemon struct {
	url, token string
	c          *client.Client
	// dataDir holds the daemon's SQLite database (differently.db).
	dataDir string
}

func startDaemon(t *testing.T) *devDaemon { return startDaemonWith(t, nil) }

// startDaemonWith starts a development daemon with cfg as its config file (nil:
// none).
func startDaemonWith(t *testing.T, cfg *config.Config) *devDaemon {
	t.Helper()
	d := daemontest.Start(t, func(o *daemon.Options) { o.Config = cfg })
	return &devDaemon{url: d.URL, token: d.Token, c: d.Client, dataDir: d.DataDir}
}

// store opens the daemon's database beside it, as a second replica would.
func (dd *devDaemon) store(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(dd.dataDir, "differently.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// projectToken makes a token of org/project through the admin API.
func (dd *devDaemon) projectToken(t *testing.T, project string) string {
	t.Helper()
	org := "default"
	tok, err := dd.c.CreateToken(t.Context(), client.TokenCreate{Scope: "project", Org: &org, Project: &project})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}

// sandbox creates a running sandbox on the fake pool in project, through the API.
func (dd *devDaemon) sandbox(t *testing.T, project string, labels map[string]string) client.Sandbox {
	t.Helper()
	pool := "fake"
	body := client.SandboxCreate{Project: &project, Labels: &labels,
		Placement: &client.Placement{AllowedPools: &[]string{pool}},
		Resources: &client.Resources{CPU: 1, MemoryMiB: 1024}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sb, err := dd.c.CreateSandboxAndWait(ctx, body, "")
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != "running" {
		t.Fatalf("sandbox %s is %s, want running", sb.Id, sb.State)
	}
	return *sb
}

// browser is a plain HTTP client that keeps cookies and does not follow
// redirects, so that each answer can be checked.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
	// pages records every URL asked and every Location answered, and bodies every
	// page, for the check that no token shows in them.
	urls   []string
	bodies []string
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request; origin "" sends no Origin header.
func (b *browser) do(method, path string, form url.Values, origin string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	b.urls = append(b.urls, req.URL.String(), resp.Header.Get("Location"))
	b.bodies = append(b.bodies, string(data))
	return resp, string(data)
}

func (b *browser) get(path string) (*http.Response, string) {
	return b.do(http.MethodGet, path, nil, "")
}

// post sends a form from the console's own origin.
func (b *browser) post(path string, form url.Values) (*http.Response, string) {
	return b.do(http.MethodPost, path, form, b.base)
}

// signIn signs in with token and fails the test unless it worked.
func (b *browser) signIn(token string) {
	b.t.Helper()
	resp, body := b.post("/ui/signin", url.Values{"token": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/sandboxes" {
		b.t.Fatalf("sign-in: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

// csrf is the CSRF token of the signed-in session, read from a page's form.
func (b *browser) csrf() string {
	b.t.Helper()
	_, body := b.get("/ui/sandboxes")
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		b.t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}
