package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/store"
)

// testScheduler is the actor of the transitions these tests make in the
// scheduler's place.
var testScheduler = lifecycle.Scheduler("test")

// start places and runs a queued sandbox on its allowed pool through the lifecycle
// transitions, as the scheduler does, with a real instance on the pool's adapter.
func (e *env) start(id string) {
	e.t.Helper()
	ctx := context.Background()
	sb, err := e.st.GetSandbox(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	pool := sb.Placement.AllowedPools[0]
	v, _ := e.pools.View(pool)
	inst, err := v.Adapter.Create(ctx, adapters.CreateRequest{ID: sb.ID, Installation: e.inst,
		Labels: adapters.OwnershipLabels(sb.Labels, sb.ID, e.inst)})
	if err != nil {
		e.t.Fatal(err)
	}
	now := e.clk.Now()
	_, err = e.st.UpdateSandbox(ctx, id, now, func(cur *store.Sandbox) error {
		err := lifecycle.Place(cur, lifecycle.Placement{Pool: pool, Claimer: "test", ClaimUntil: now.Add(time.Minute),
			Candidates: lifecycle.Candidates([]string{pool}, map[string]string{"other": "not allowed"})}, now, testScheduler)
		if err != nil {
			return err
		}
		return lifecycle.Run(cur, lifecycle.Instance{Ref: inst.Ref}, now, 1500*time.Millisecond, testScheduler)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) events(secret, path string) httpapi.EventList {
	e.t.Helper()
	var out httpapi.EventList
	e.do(secret, "GET", path, nil).want(e.t, http.StatusOK).decode(e.t, &out)
	return out
}

func types(items []httpapi.Event) []string {
	var out []string
	for _, ev := range items {
		out = append(out, string(ev.Type))
	}
	return out
}

func TestSandboxHistory(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		id := e.createSandbox(e.admin, "fake", nil).Id
		e.start(id)
		e.do(e.admin, "POST", "/v1/sandboxes/"+id+"/stop", nil).want(t, http.StatusOK)
		e.do(e.admin, "DELETE", "/v1/sandboxes/"+id, nil).want(t, http.StatusAccepted)

		got := e.events(e.admin, "/v1/sandboxes/"+id+"/events")
		want := []string{"created", "placed", "running", "stopped", "terminating"}
		if !slices.Equal(types(got.Items), want) {
			t.Fatalf("history %v, want %v", types(got.Items), want)
		}
		if got.NextCursor == "" {
			t.Fatal("no nextCursor on the last page")
		}
		prev := httpapi.SandboxState("")
		for i, ev := range got.Items {
			if ev.SandboxId != id || ev.Org != "default" || ev.Project != "default" || ev.Cursor == "" || ev.Time.IsZero() {
				t.Fatalf("event %d: %+v", i, ev)
			}
			if i > 0 && (ev.Seq <= got.Items[i-1].Seq || ev.From == nil || *ev.From != prev) {
				t.Fatalf("event %d does not follow the one before: %+v after %+v", i, ev, got.Items[i-1])
			}
			prev = ev.To
		}
		byToken := map[string]bool{"created": true, "stopped": true, "terminating": true}
		for _, ev := range got.Items {
			if want := byToken[string(ev.Type)]; want != strings.HasPrefix(ev.Actor, "token:tok_") ||
				!want && ev.Actor != string(testScheduler) {
				t.Fatalf("%s by %q", ev.Type, ev.Actor)
			}
		}
		placed, running := got.Items[1], got.Items[2]
		if placed.Pool == nil || *placed.Pool != "fake" || placed.Attempt == nil || *placed.Attempt != 1 ||
			placed.Candidates == nil || len(*placed.Candidates) != 2 {
			t.Fatalf("placed: %+v", placed)
		}
		if c := (*placed.Candidates)[1]; c.Pool != "other" || c.Reason == nil || *c.Reason != "not allowed" || c.Rank != nil {
			t.Fatalf("passed-over candidate: %+v", c)
		}
		if running.DurationMs == nil || *running.DurationMs != 1500 {
			t.Fatalf("running: %+v", running)
		}

		// Pages of two, each continuing where the last ended, then an empty one.
		var paged []string
		cursor := ""
		for range 4 {
			page := e.events(e.admin, "/v1/sandboxes/"+id+"/events?limit=2&cursor="+url.QueryEscape(cursor))
			paged = append(paged, types(page.Items)...)
			cursor = page.NextCursor
		}
		if !slices.Equal(paged, want) {
			t.Fatalf("paged history %v, want %v", paged, want)
		}
		// From any event's cursor, what follows it.
		after := e.events(e.admin, "/v1/sandboxes/"+id+"/events?cursor="+url.QueryEscape(got.Items[2].Cursor))
		if !slices.Equal(types(after.Items), want[3:]) {
			t.Fatalf("after running: %v", types(after.Items))
		}
		only := e.events(e.admin, "/v1/sandboxes/"+id+"/events?type=running,stopped")
		if !slices.Equal(types(only.Items), []string{"running", "stopped"}) {
			t.Fatalf("type filter: %v", types(only.Items))
		}
		// Listings of every sandbox show an event once the transactions older than
		// it ended, which on PostgreSQL may be a moment after its commit: the
		// stream waits for it.
		all := e.awaitEvents(1, "pool=fake&type=terminating")
		if !slices.Equal(types(all), []string{"terminating"}) || all[0].SandboxId != id {
			t.Fatalf("pool and type filter: %+v", all)
		}

		for _, path := range []string{
			"/v1/sandboxes/" + id + "/events?type=exploded",
			"/v1/sandboxes/" + id + "/events?cursor=not-a-cursor",
			"/v1/events?cursor=%7B%7D",
			"/v1/events?limit=0",
		} {
			e.do(e.admin, "GET", path, nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
		e.do(e.admin, "GET", "/v1/sandboxes/sbx_missing/events", nil).want(t, http.StatusNotFound, api.CodeNotFound)
	})
}

func TestEventsTenancy(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		web := e.projectToken("acme", "web")
		mine := e.createSandbox(web, "fake", nil).Id
		theirs := e.createSandbox(e.admin, "fake", nil).Id
		e.awaitEvents(2, "")

		e.do(web, "GET", "/v1/sandboxes/"+theirs+"/events", nil).want(t, http.StatusNotFound, api.CodeNotFound)
		for _, path := range []string{"/v1/events", "/v1/events?sandbox=" + theirs, "/v1/events?project=default/default",
			"/v1/events?project=acme/web"} {
			for _, ev := range e.events(web, path).Items {
				if ev.SandboxId != mine {
					t.Fatalf("%s showed a project token another project's event: %+v", path, ev)
				}
			}
		}
		if got := e.events(web, "/v1/events"); len(got.Items) != 1 {
			t.Fatalf("project token sees %d events, want its one", len(got.Items))
		}
		for path, want := range map[string]string{
			"/v1/events?project=acme/web": mine, "/v1/events?project=web": mine, "/v1/events?sandbox=" + theirs: theirs,
		} {
			got := e.events(e.admin, path)
			if len(got.Items) != 1 || got.Items[0].SandboxId != want {
				t.Fatalf("admin %s: %+v", path, got.Items)
			}
		}
		if got := e.events(e.admin, "/v1/events"); len(got.Items) != 2 {
			t.Fatalf("admin sees %d events, want 2", len(got.Items))
		}
	})
}

// awaitEvents reads the first n events of /v1/events?query through a follow stream,
// which waits until they can be listed.
func (e *env) awaitEvents(n int, query string) []httpapi.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := e.followQuery(ctx, query)
	var out []httpapi.Event
	for range n {
		out = append(out, next())
	}
	return out
}

// follow opens a follow stream and returns a function reading its next event.
func (e *env) follow(ctx context.Context, cursor string) func() httpapi.Event {
	e.t.Helper()
	return e.followQuery(ctx, "cursor="+url.QueryEscape(cursor))
}

// followQuery is follow with the listing's query.
func (e *env) followQuery(ctx context.Context, query string) func() httpapi.Event {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/events?follow=true&"+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		e.t.Fatalf("follow: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	return func() httpapi.Event {
		e.t.Helper()
		if !sc.Scan() {
			e.t.Fatalf("the follow stream ended: %v", sc.Err())
		}
		var ev httpapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		return ev
	}
}

// A follower gets each event as it is recorded, and one that reconnects with the
// cursor of the last event it read gets what came after, nothing twice.
func TestEventsFollow(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		first := e.createSandbox(e.admin, "fake", nil).Id

		c1, stop1 := context.WithCancel(ctx)
		next := e.follow(c1, "")
		if ev := next(); ev.SandboxId != first || ev.Type != "created" {
			t.Fatalf("first event %+v", ev)
		}
		e.start(first)
		placed, running := next(), next()
		if placed.Type != "placed" || running.Type != "running" {
			t.Fatalf("then %s, %s", placed.Type, running.Type)
		}
		stop1()

		// Recorded while nobody follows.
		e.do(e.admin, "DELETE", "/v1/sandboxes/"+first, nil).want(t, http.StatusAccepted)
		second := e.createSandbox(e.admin, "fake", nil).Id

		next = e.follow(ctx, running.Cursor)
		if ev := next(); ev.SandboxId != first || ev.Type != "terminating" {
			t.Fatalf("after reconnecting: %+v", ev)
		}
		if ev := next(); ev.SandboxId != second || ev.Type != "created" {
			t.Fatalf("then %+v", ev)
		}
		third := e.createSandbox(e.admin, "fake", nil).Id
		if ev := next(); ev.SandboxId != third || ev.Type != "created" {
			t.Fatalf("live after reconnecting: %+v", ev)
		}
	})
}
