package e2b_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/e2b"
)

const secret = "a test secret that is long enough for the daemon"

// env is a development daemon with the E2B front door, an admin token, and a
// project token for E2B's SDKs.
type env struct {
	t     *testing.T
	url   string
	admin string
	key   string // project token of project "e2b"
}

func startDaemon(t *testing.T, cfg *config.Config) *env {
	t.Helper()
	dir := t.TempDir()
	d, err := daemon.New(t.Context(), daemon.Options{
		Dev: true, DataDir: dir, Listen: "127.0.0.1:0", Config: cfg,
		Getenv: func(k string) string {
			if k == config.EnvE2BTokenSecret {
				return secret
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(dir, daemon.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon Run: %v", err)
		}
	})
	e := &env{t: t, url: d.URL(), admin: strings.TrimSpace(string(tok))}
	return e
}

// setup adds the project token and two profiles: "fakebox" on the fake pool, which
// pauses, and "devbox" on devhost, which does not.
func (e *env) setup() {
	e.t.Helper()
	var created struct {
		Secret string `json:"secret"`
	}
	e.native("POST", "/v1/admin/tokens", map[string]any{"scope": "project", "org": "acme", "project": "e2b"}, 201, &created)
	e.key = created.Secret
	for name, pool := range map[string]string{"fakebox": "fake", "devbox": "devhost"} {
		e.native("PUT", "/v1/admin/profiles/"+name, map[string]any{
			"placement": map[string]any{"allowedPools": []string{pool}}, "ttlSeconds": 3600,
		}, 200, nil)
	}
}

// with is e for a subtest: its failures end the subtest.
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

func (e *env) native(method, path string, body any, want int, out any) {
	e.t.Helper()
	e.send(method, path, map[string]string{"Authorization": "Bearer " + e.admin}, body, want, out)
}

// e2b calls the front door as E2B's SDKs do: X-API-KEY, and a chunked JSON body.
func (e *env) e2b(method, path string, body any, want int, out any) http.Header {
	e.t.Helper()
	return e.send(method, "/e2b"+path, map[string]string{"X-API-KEY": e.key}, body, want, out)
}

func (e *env) send(method, path string, headers map[string]string, body any, want int, out any) http.Header {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		// Hiding the length makes net/http send the body chunked, as the SDKs do.
		rd = io.MultiReader(bytes.NewReader(b))
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: decoding %q: %v", method, path, data, err)
		}
	}
	return resp.Header
}

type sandbox struct {
	TemplateID      string  `json:"templateID"`
	SandboxID       string  `json:"sandboxID"`
	ClientID        string  `json:"clientID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken"`
	Domain          *string `json:"domain"`
}

type detail struct {
	SandboxID  string            `json:"sandboxID"`
	TemplateID string            `json:"templateID"`
	State      string            `json:"state"`
	Metadata   map[string]string `json:"metadata"`
	EndAt      time.Time         `json:"endAt"`
	StartedAt  time.Time         `json:"startedAt"`
	Lifecycle  *struct {
		AutoResume bool   `json:"autoResume"`
		OnTimeout  string `json:"onTimeout"`
	} `json:"lifecycle"`
}

type snapshot struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *env) create(template string, metadata map[string]string) sandbox {
	e.t.Helper()
	var sb sandbox
	e.e2b("POST", "/v2/sandboxes", map[string]any{
		"templateID": template, "timeout": 300, "metadata": metadata,
		"envVars": map[string]string{"GREETING": "hi"}, "secure": true, "allow_internet_access": true,
	}, 201, &sb)
	return sb
}

func TestControlPlane(t *testing.T) {
	e := startDaemon(t, config.Default())
	e.setup()

	t.Run("keys", func(t *testing.T) {
		e := e.with(t)
		var ae apiError
		e.send("GET", "/e2b/v2/sandboxes", nil, nil, 401, &ae)
		if ae.Code != 401 || ae.Message == "" {
			t.Fatalf("no key: %+v", ae)
		}
		e.send("GET", "/e2b/v2/sandboxes", map[string]string{"X-API-KEY": "dly_wrong"}, nil, 401, &ae)
		// The native API's Bearer form is taken too.
		e.send("GET", "/e2b/v2/sandboxes", map[string]string{"Authorization": "Bearer " + e.key}, nil, 200, nil)
	})

	sb := e.create("fakebox", map[string]string{"user": "a b"})
	t.Run("create", func(t *testing.T) {
		e := e.with(t)
		if sb.TemplateID != "fakebox" || sb.SandboxID == "" || sb.ClientID == "" || sb.EnvdVersion != e2b.EnvdVersion || sb.Domain != nil {
			t.Fatalf("create answered %+v", sb)
		}
		if !e2b.VerifyAccessToken([]byte(secret), sb.SandboxID, sb.EnvdAccessToken) {
			t.Fatalf("envdAccessToken %q does not verify", sb.EnvdAccessToken)
		}
		var d detail
		e.e2b("GET", "/sandboxes/"+sb.SandboxID, nil, 200, &d)
		if d.State != "running" || d.Metadata["user"] != "a b" || d.TemplateID != "fakebox" {
			t.Fatalf("get answered %+v", d)
		}
		if d.Lifecycle == nil || d.Lifecycle.AutoResume || d.Lifecycle.OnTimeout != "kill" {
			t.Fatalf("get answered lifecycle %+v, want kill on timeout and no auto-resume", d.Lifecycle)
		}
		if left := d.EndAt.Sub(d.StartedAt); left < 4*time.Minute || left > 6*time.Minute {
			t.Fatalf("a 300 s timeout ends %v after the start", left)
		}
		var ae apiError
		for _, body := range []map[string]any{
			{"templateID": "fakebox", "autoPause": true},
			{"templateID": "nosuchprofile"},
			{"templateID": "fakebox", "timeout": -1},
			{"templateID": "fakebox", "metadata": map[string]string{"": "x"}},
			{"timeout": 30},
		} {
			e.e2b("POST", "/v2/sandboxes", body, 400, &ae)
			if ae.Code != 400 {
				t.Fatalf("%v: %+v", body, ae)
			}
		}
	})

	t.Run("other project", func(t *testing.T) {
		e := e.with(t)
		var created struct {
			Secret string `json:"secret"`
		}
		e.native("POST", "/v1/admin/tokens", map[string]any{"scope": "project", "org": "acme", "project": "other"}, 201, &created)
		other := map[string]string{"X-API-KEY": created.Secret}
		e.send("GET", "/e2b/sandboxes/"+sb.SandboxID, other, nil, 404, nil)
		e.send("DELETE", "/e2b/sandboxes/"+sb.SandboxID, other, nil, 404, nil)
		e.send("POST", "/e2b/sandboxes/"+sb.SandboxID+"/timeout", other, map[string]int{"timeout": 10}, 404, nil)
		var list []detail
		e.send("GET", "/e2b/v2/sandboxes", other, nil, 200, &list)
		if len(list) != 0 {
			t.Fatalf("another project lists %+v", list)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		e := e.with(t)
		var before, after detail
		e.e2b("GET", "/sandboxes/"+sb.SandboxID, nil, 200, &before)
		e.e2b("POST", "/sandboxes/"+sb.SandboxID+"/timeout", map[string]int{"timeout": 3600}, 204, nil)
		e.e2b("GET", "/sandboxes/"+sb.SandboxID, nil, 200, &after)
		if !after.EndAt.After(before.EndAt.Add(50 * time.Minute)) {
			t.Fatalf("endAt %v after a 3600 s timeout, was %v", after.EndAt, before.EndAt)
		}
		e.e2b("POST", "/sandboxes/"+sb.SandboxID+"/timeout", map[string]any{}, 400, nil)
	})

	t.Run("pause and connect", func(t *testing.T) {
		e := e.with(t)
		id := sb.SandboxID
		e.e2b("POST", "/sandboxes/"+id+"/resume", map[string]any{}, 409, nil)
		e.e2b("POST", "/sandboxes/"+id+"/pause", nil, 204, nil)
		var d detail
		e.e2b("GET", "/sandboxes/"+id, nil, 200, &d)
		if d.State != "paused" {
			t.Fatalf("paused sandbox is %s", d.State)
		}
		var ae apiError
		e.e2b("POST", "/sandboxes/"+id+"/pause", nil, 409, &ae)
		var c sandbox
		e.e2b("POST", "/v2/sandboxes/"+id+"/connect", map[string]int{"timeout": 300}, 201, &c)
		if c.SandboxID != id || !e2b.VerifyAccessToken([]byte(secret), id, c.EnvdAccessToken) {
			t.Fatalf("connect answered %+v", c)
		}
		e.e2b("GET", "/sandboxes/"+id, nil, 200, &d)
		if d.State != "running" {
			t.Fatalf("connected sandbox is %s", d.State)
		}
		// Connecting to a running sandbox: 200, and a shorter timeout does not
		// bring its end forward.
		end := d.EndAt
		e.e2b("POST", "/v2/sandboxes/"+id+"/connect", map[string]int{"timeout": 10}, 200, &c)
		e.e2b("POST", "/sandboxes/"+id+"/connect", map[string]any{}, 200, &c)
		e.e2b("GET", "/sandboxes/"+id, nil, 200, &d)
		if d.EndAt.Before(end) {
			t.Fatalf("connect brought the end forward from %v to %v", end, d.EndAt)
		}
		// resume, the older form, wants a paused sandbox and answers 201.
		e.e2b("POST", "/sandboxes/"+id+"/pause", nil, 204, nil)
		e.e2b("POST", "/sandboxes/"+id+"/resume", map[string]int{"timeout": 300}, 201, &c)
	})

	t.Run("a pool without pause", func(t *testing.T) {
		e := e.with(t)
		dev := e.create("devbox", nil)
		var ae apiError
		e.e2b("POST", "/sandboxes/"+dev.SandboxID+"/pause", nil, 400, &ae)
		if !strings.Contains(ae.Message, "devhost") || !strings.Contains(ae.Message, "pause") {
			t.Fatalf("pause on devhost: %+v", ae)
		}
		e.e2b("DELETE", "/sandboxes/"+dev.SandboxID, nil, 204, nil)
	})

	t.Run("list", func(t *testing.T) {
		e := e.with(t)
		want := map[string]bool{}
		for range 3 {
			want[e.create("fakebox", map[string]string{"app": "x y", "team.1": "a&b=c"}).SandboxID] = true
		}
		filter := url.QueryEscape(url.Values{"app": {"x y"}, "team.1": {"a&b=c"}}.Encode())
		seen := map[string]bool{}
		next := ""
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("paging does not end")
			}
			q := "/v2/sandboxes?limit=2&metadata=" + filter
			if next != "" {
				q += "&nextToken=" + url.QueryEscape(next)
			}
			var page []detail
			h := e.e2b("GET", q, nil, 200, &page)
			if len(page) > 2 {
				t.Fatalf("a page of %d with limit 2", len(page))
			}
			for _, d := range page {
				if seen[d.SandboxID] || !want[d.SandboxID] || d.Metadata["app"] != "x y" {
					t.Fatalf("page holds %+v (seen %v)", d, seen)
				}
				seen[d.SandboxID] = true
			}
			if next = h.Get("X-Next-Token"); next == "" {
				break
			}
		}
		if len(seen) != 3 {
			t.Fatalf("listed %d of 3", len(seen))
		}
		var page []detail
		e.e2b("GET", "/v2/sandboxes?metadata="+url.QueryEscape("app=nothing"), nil, 200, &page)
		if len(page) != 0 {
			t.Fatalf("a filter matching nothing lists %+v", page)
		}
		e.e2b("GET", "/v2/sandboxes?state=paused&metadata="+filter, nil, 200, &page)
		if len(page) != 0 {
			t.Fatalf("state=paused lists running sandboxes: %+v", page)
		}
		e.e2b("GET", "/sandboxes?metadata="+filter, nil, 200, &page)
		if len(page) != 3 {
			t.Fatalf("the v1 list has %d of 3", len(page))
		}
		// What the store cannot filter on is filtered page by page.
		e.e2b("GET", "/v2/sandboxes?template=fakebox&metadata="+filter, nil, 200, &page)
		if len(page) != 3 {
			t.Fatalf("template=fakebox lists %d of 3", len(page))
		}
		e.e2b("GET", "/v2/sandboxes?template=devbox&metadata="+filter, nil, 200, &page)
		if len(page) != 0 {
			t.Fatalf("template=devbox lists fakebox sandboxes: %+v", page)
		}
		after := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		e.e2b("GET", "/v2/sandboxes?startedAfter="+after+"&metadata="+filter, nil, 200, &page)
		if len(page) != 0 {
			t.Fatalf("startedAfter an hour from now lists %+v", page)
		}
		e.e2b("GET", "/v2/sandboxes?order=desc", nil, 400, nil)
	})

	t.Run("refreshes", func(t *testing.T) {
		e := e.with(t)
		id := sb.SandboxID
		var before, after detail
		e.e2b("POST", "/sandboxes/"+id+"/timeout", map[string]int{"timeout": 60}, 204, nil)
		e.e2b("GET", "/sandboxes/"+id, nil, 200, &before)
		e.e2b("POST", "/sandboxes/"+id+"/refreshes", map[string]int{"duration": 3600}, 204, nil)
		e.e2b("GET", "/sandboxes/"+id, nil, 200, &after)
		if !after.EndAt.After(before.EndAt.Add(50 * time.Minute)) {
			t.Fatalf("endAt %v after a 3600 s refresh, was %v", after.EndAt, before.EndAt)
		}
		// A shorter refresh keeps the later end; so does one without a body.
		end := after.EndAt
		e.e2b("POST", "/sandboxes/"+id+"/refreshes", map[string]int{"duration": 10}, 204, nil)
		e.e2b("POST", "/sandboxes/"+id+"/refreshes", nil, 204, nil)
		e.e2b("GET", "/sandboxes/"+id, nil, 200, &after)
		if after.EndAt.Before(end) {
			t.Fatalf("a shorter refresh brought the end forward from %v to %v", end, after.EndAt)
		}
		e.e2b("POST", "/sandboxes/"+id+"/refreshes", map[string]int{"duration": 3601}, 400, nil)
		e.e2b("POST", "/sandboxes/nosuchsandbox/refreshes", map[string]int{"duration": 10}, 404, nil)
	})

	t.Run("health", func(t *testing.T) {
		e := e.with(t)
		e.e2b("GET", "/health", nil, 204, nil)
		e.send("GET", "/e2b/health", nil, nil, 401, nil)
	})

	t.Run("snapshots", func(t *testing.T) {
		e := e.with(t)
		id := sb.SandboxID
		var first, second snapshot
		e.e2b("POST", "/sandboxes/"+id+"/snapshots", map[string]any{}, 201, &first)
		if !strings.HasPrefix(first.SnapshotID, "snap_") || first.Names == nil || len(first.Names) != 0 {
			t.Fatalf("create snapshot answered %+v", first)
		}
		e.e2b("POST", "/sandboxes/"+id+"/snapshots", nil, 201, &second)
		e.e2b("POST", "/sandboxes/"+id+"/snapshots", map[string]string{"name": "mine"}, 400, nil)
		e.e2b("POST", "/sandboxes/nosuchsandbox/snapshots", map[string]any{}, 404, nil)

		// Pages of one, oldest first.
		var got []string
		next := ""
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("paging does not end")
			}
			q := "/snapshots?limit=1&sandboxID=" + id
			if next != "" {
				q += "&nextToken=" + url.QueryEscape(next)
			}
			var page []snapshot
			h := e.e2b("GET", q, nil, 200, &page)
			for _, sn := range page {
				got = append(got, sn.SnapshotID)
			}
			if next = h.Get("X-Next-Token"); next == "" {
				break
			}
		}
		if strings.Join(got, " ") != first.SnapshotID+" "+second.SnapshotID {
			t.Fatalf("listed %v, want %s then %s", got, first.SnapshotID, second.SnapshotID)
		}
		var page []snapshot
		e.e2b("GET", "/snapshots?sandboxID="+id+"&name="+second.SnapshotID, nil, 200, &page)
		if len(page) != 1 || page[0].SnapshotID != second.SnapshotID {
			t.Fatalf("by name: %+v", page)
		}
		e.e2b("GET", "/snapshots", nil, 400, nil)

		// A snapshot is a template to create from.
		var restored sandbox
		e.e2b("POST", "/v2/sandboxes", map[string]any{"templateID": first.SnapshotID, "timeout": 60}, 201, &restored)
		if restored.TemplateID != first.SnapshotID {
			t.Fatalf("created from a snapshot: %+v", restored)
		}
		e.e2b("DELETE", "/sandboxes/"+restored.SandboxID, nil, 204, nil)
		e.e2b("POST", "/v2/sandboxes", map[string]any{"templateID": "snap_nosuchsnapshot"}, 400, nil)

		// Another project sees none of them.
		var created struct {
			Secret string `json:"secret"`
		}
		e.native("POST", "/v1/admin/tokens", map[string]any{"scope": "project", "org": "acme", "project": "snapless"}, 201, &created)
		other := map[string]string{"X-API-KEY": created.Secret}
		e.send("GET", "/e2b/snapshots?sandboxID="+id, other, nil, 404, nil)
		e.send("POST", "/e2b/v2/sandboxes", other, map[string]any{"templateID": first.SnapshotID}, 400, nil)
		e.send("DELETE", "/e2b/templates/"+first.SnapshotID, other, nil, 404, nil)
		e.send("GET", "/e2b/templates/aliases/"+first.SnapshotID, other, nil, 404, nil)
		var alias struct {
			TemplateID string `json:"templateID"`
			Public     bool   `json:"public"`
		}
		e.e2b("GET", "/templates/aliases/"+first.SnapshotID, nil, 200, &alias)
		if alias.TemplateID != first.SnapshotID || alias.Public {
			t.Fatalf("a snapshot's alias: %+v", alias)
		}

		// deleteSnapshot is DELETE /templates/{id}.
		e.e2b("DELETE", "/templates/"+second.SnapshotID, nil, 204, nil)
		e.e2b("DELETE", "/templates/"+second.SnapshotID, nil, 404, nil)
		e.e2b("DELETE", "/templates/fakebox", nil, 501, nil)
	})

	t.Run("fork", func(t *testing.T) {
		e := e.with(t)
		var results []struct {
			Sandbox *sandbox  `json:"sandbox"`
			Error   *apiError `json:"error"`
		}
		e.e2b("POST", "/sandboxes/"+sb.SandboxID+"/fork", map[string]int{"timeout": 120, "count": 2}, 201, &results)
		if len(results) != 2 {
			t.Fatalf("two forks answered %d results", len(results))
		}
		for _, res := range results {
			if res.Error != nil || res.Sandbox == nil || res.Sandbox.SandboxID == sb.SandboxID ||
				!e2b.VerifyAccessToken([]byte(secret), res.Sandbox.SandboxID, res.Sandbox.EnvdAccessToken) {
				t.Fatalf("a fork answered %+v / %+v", res.Sandbox, res.Error)
			}
			var d detail
			e.e2b("GET", "/sandboxes/"+res.Sandbox.SandboxID, nil, 200, &d)
			if d.State != "running" || d.Metadata["user"] != "a b" || d.TemplateID != "fakebox" {
				t.Fatalf("a fork is %+v", d)
			}
			if left := d.EndAt.Sub(d.StartedAt); left < time.Minute || left > 3*time.Minute {
				t.Fatalf("a 120 s fork ends %v after its start", left)
			}
			e.e2b("DELETE", "/sandboxes/"+res.Sandbox.SandboxID, nil, 204, nil)
		}
		e.e2b("POST", "/sandboxes/"+sb.SandboxID+"/fork", map[string]int{"count": 0}, 400, nil)
		e.e2b("POST", "/sandboxes/"+sb.SandboxID+"/fork", map[string]int{"count": 101}, 400, nil)
		e.e2b("POST", "/sandboxes/nosuchsandbox/fork", nil, 404, nil)
	})

	t.Run("template aliases", func(t *testing.T) {
		e := e.with(t)
		// Template.exists: base and profiles exist; any other name does not.
		type aliasResponse struct {
			TemplateID string `json:"templateID"`
			Public     bool   `json:"public"`
		}
		for _, tt := range []struct {
			alias  string
			status int
			want   aliasResponse
		}{
			{"fakebox", 200, aliasResponse{TemplateID: "fakebox"}},
			{"base", 200, aliasResponse{TemplateID: "base", Public: true}},
			{"nosuchprofile", 404, aliasResponse{}},
			{"Not_A_Name", 404, aliasResponse{}},
			{"snap_nosuchsnapshot", 404, aliasResponse{}},
		} {
			var got aliasResponse
			e.e2b("GET", "/templates/aliases/"+tt.alias, nil, tt.status, &got)
			if tt.status == 200 && got != tt.want {
				t.Errorf("%s: %+v, want %+v", tt.alias, got, tt.want)
			}
		}
		e.send("GET", "/e2b/templates/aliases/fakebox", nil, nil, 401, nil)
	})

	t.Run("unserved", func(t *testing.T) {
		e := e.with(t)
		// What E2B publishes and the front door does not serve is 501, saying why,
		// for a sandbox that exists as for one that does not: a 404 would make the
		// SDK report a missing sandbox or template.
		for _, tt := range []struct{ method, path, says string }{
			{"GET", "/sandboxes/" + sb.SandboxID + "/metrics", "metrics"},
			{"GET", "/sandboxes/nosuchsandbox/metrics", "metrics"},
			{"GET", "/sandboxes/metrics", "metrics"},
			{"GET", "/v2/sandboxes/" + sb.SandboxID + "/logs", "logs"},
			{"PUT", "/sandboxes/" + sb.SandboxID + "/network", "network"},
			{"POST", "/v3/templates", "profiles"},
			{"DELETE", "/templates/tags", "profiles"},
			{"GET", "/teams", "tokens"},
			{"GET", "/volumes", "volumes"},
			{"DELETE", "/secrets/s1", "secrets"},
		} {
			var ae apiError
			e.e2b(tt.method, tt.path, nil, 501, &ae)
			if ae.Code != 501 || !strings.Contains(ae.Message, tt.says) {
				t.Fatalf("%s %s: %+v, want 501 saying %q", tt.method, tt.path, ae, tt.says)
			}
		}
		e.send("GET", "/e2b/sandboxes/"+sb.SandboxID+"/metrics", nil, nil, 401, nil)
		var ae apiError
		e.e2b("GET", "/no/such/route", nil, 404, &ae)
		if ae.Code != 404 {
			t.Fatalf("an unknown route: %+v", ae)
		}
	})

	t.Run("kill twice", func(t *testing.T) {
		e := e.with(t)
		e.e2b("DELETE", "/sandboxes/"+sb.SandboxID, nil, 204, nil)
		var ae apiError
		e.e2b("DELETE", "/sandboxes/"+sb.SandboxID, nil, 404, &ae)
		if ae.Code != 404 {
			t.Fatalf("second kill: %+v", ae)
		}
		e.e2b("GET", "/sandboxes/"+sb.SandboxID, nil, 404, nil)
		e.e2b("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", map[string]int{"timeout": 10}, 404, nil)
		e.e2b("DELETE", "/sandboxes/nosuchsandbox", nil, 404, nil)
	})

	t.Run("quota", func(t *testing.T) {
		e := e.with(t)
		e.native("PUT", "/v1/admin/projects/acme/small", map[string]any{"quota": map[string]any{"sandboxes": 1}}, 200, nil)
		var created struct {
			Secret string `json:"secret"`
		}
		e.native("POST", "/v1/admin/tokens", map[string]any{"scope": "project", "org": "acme", "project": "small"}, 201, &created)
		e.key = created.Secret
		e.create("fakebox", nil)
		var ae apiError
		e.e2b("POST", "/v2/sandboxes", map[string]any{"templateID": "fakebox"}, 429, &ae)
		if ae.Code != 429 {
			t.Fatalf("over quota: %+v", ae)
		}
	})

	t.Run("base template", func(t *testing.T) {
		e := e.with(t)
		b := e.create("base", nil)
		if b.TemplateID != "base" {
			t.Fatalf("base answered %+v", b)
		}
	})
}

// With e2b.enabled false nothing is served under /e2b: the native API answers.
func TestDisabled(t *testing.T) {
	cfg := config.Default()
	cfg.E2B.Enabled = false
	e := startDaemon(t, cfg)
	e.setup()
	var native struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	e.native("GET", "/e2b/v2/sandboxes", nil, 404, &native)
	if native.Error.Code != "not_found" {
		t.Fatalf("disabled front door: %+v", native)
	}
}
