package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pooladmin"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// listLimit is how many sandboxes the list shows; the filters narrow it down.
const listLimit = 200

// countPages bounds the listing that counts each pool's starting and queued
// sandboxes (countPages pages of store.MaxLimit).
const countPages = 10

var allStates = []store.State{store.StateQueued, store.StateProvisioning, store.StateRunning, store.StateStopped,
	store.StatePaused, store.StateTerminating, store.StateTerminated, store.StateFailed}

// filters are the sandbox list's, read from the query string.
type filters struct {
	State, Pool, Project, Label string
}

func readFilters(q url.Values) filters {
	return filters{State: strings.TrimSpace(q.Get("state")), Pool: strings.TrimSpace(q.Get("pool")),
		Project: strings.TrimSpace(q.Get("project")), Label: strings.TrimSpace(q.Get("label"))}
}

// query is the filters as a query string, for the script's refresh of the rows.
func (f filters) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"state": f.State, "pool": f.Pool, "project": f.Project, "label": f.Label} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

// storeFilter turns the filters into the sandbox service's. The service narrows
// a project token to its own project whatever the filter says.
func (f filters) storeFilter() (store.SandboxFilter, error) {
	sf := store.SandboxFilter{Pool: f.Pool, Limit: listLimit}
	if f.State != "" {
		if !store.State(f.State).Valid() {
			return sf, api.Errorf(api.CodeInvalidRequest, "unknown state %q", f.State)
		}
		sf.States = []store.State{store.State(f.State)}
	}
	if org, project, ok := strings.Cut(f.Project, "/"); ok {
		sf.Org, sf.Project = org, project
	} else {
		sf.Project = f.Project
	}
	for pair := range strings.FieldsSeq(strings.ReplaceAll(f.Label, ",", " ")) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return sf, api.Errorf(api.CodeInvalidRequest, "a label filter is key=value, not %q", pair)
		}
		if sf.Labels == nil {
			sf.Labels = map[string]string{}
		}
		sf.Labels[k] = v
	}
	return sf, nil
}

type sandboxRow struct {
	store.Sandbox
	Cost    float64
	HasCost bool
}

func (c *Console) row(sb store.Sandbox) sandboxRow {
	cost, ok := c.svc.Cost(sb)
	return sandboxRow{Sandbox: sb, Cost: cost, HasCost: ok}
}

func (c *Console) sandboxData(r *http.Request, v view) (map[string]any, error) {
	f := readFilters(r.URL.Query())
	data := map[string]any{"Filters": f, "States": allStates, "Query": f.query(), "Limit": listLimit}
	sf, err := f.storeFilter()
	if err != nil {
		return data, err
	}
	list, next, err := c.svc.List(r.Context(), v.caller, sf)
	if err != nil {
		return data, err
	}
	rows := make([]sandboxRow, 0, len(list))
	for _, sb := range list {
		rows = append(rows, c.row(sb))
	}
	data["Rows"], data["More"] = rows, next != ""
	return data, nil
}

func (c *Console) sandboxList(w http.ResponseWriter, r *http.Request, v view) {
	data, err := c.sandboxData(r, v)
	if err != nil {
		if e := api.AsError(err); e != nil && e.Code == api.CodeInvalidRequest {
			data["Error"] = e.Message
			c.render(w, r, http.StatusBadRequest, "sandboxes", &v, data)
			return
		}
		c.fail(w, r, &v, err)
		return
	}
	c.render(w, r, http.StatusOK, "sandboxes", &v, data)
}

func (c *Console) sandboxRows(w http.ResponseWriter, r *http.Request, v view) {
	data, err := c.sandboxData(r, v)
	if err != nil {
		c.fail(w, r, &v, err)
		return
	}
	c.render(w, r, http.StatusOK, "sandboxes", &v, data)
}

// sandboxDetail is a sandbox with its history and what may be done to it now.
func (c *Console) sandboxDetail(r *http.Request, v view) (map[string]any, error) {
	id := r.PathValue("id")
	sb, err := c.svc.Sandbox(r.Context(), v.caller, id)
	if err != nil {
		return nil, err
	}
	events, next, err := c.svc.Events(r.Context(), v.caller, id, store.EventFilter{Limit: store.MaxLimit})
	if err != nil {
		return nil, err
	}
	live := !sb.State.IsTerminal() && sb.State != store.StateTerminating
	return map[string]any{
		"SB": c.row(sb), "Events": events, "MoreEvents": next != "" && len(events) == store.MaxLimit,
		"CanStop": sb.State == store.StateRunning, "CanDelete": live, "CanTTL": live,
		"Done": doneText[r.URL.Query().Get("done")],
	}, nil
}

// doneText is the note shown after an action, named in the redirect's query.
var doneText = map[string]string{
	"stop": "Stopped.", "delete": "Deletion started: the sandbox is terminating.", "ttl": "TTL set.",
}

func (c *Console) sandboxPage(w http.ResponseWriter, r *http.Request, v view) {
	data, err := c.sandboxDetail(r, v)
	if err != nil {
		c.fail(w, r, &v, err)
		return
	}
	c.render(w, r, http.StatusOK, "sandbox", &v, data)
}

func (c *Console) sandboxLive(w http.ResponseWriter, r *http.Request, v view) {
	c.sandboxPage(w, r, v)
}

// action is one of the sandbox page's actions, confirmed on a page of its own.
type action struct {
	Title, Question, Button string
	Danger                  bool
}

var actions = map[string]action{
	"stop":   {Title: "Stop sandbox", Question: "Stop this sandbox? Its processes end; it can be started again through the API.", Button: "Stop"},
	"delete": {Title: "Delete sandbox", Question: "Delete this sandbox and its instance? This cannot be undone.", Button: "Delete", Danger: true},
	"ttl":    {Title: "Extend TTL", Question: "Set this sandbox's TTL, counted from now?", Button: "Set TTL"},
}

// readTTL reads a TTL as seconds or as a Go duration ("90m", "2h").
func readTTL(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, checkTTL(n)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d%time.Second != 0 {
		return 0, api.Errorf(api.CodeInvalidRequest, "a TTL is whole seconds (3600) or a duration (90m, 2h), not %q", s)
	}
	n := int64(d / time.Second)
	return n, checkTTL(n)
}

func checkTTL(n int64) error {
	if n < 0 || n > api.MaxTTLSeconds {
		return api.Errorf(api.CodeInvalidRequest, "a TTL is between 0 (no expiry) and %d seconds", api.MaxTTLSeconds)
	}
	return nil
}

func (c *Console) confirmPage(w http.ResponseWriter, r *http.Request, v view) {
	name := r.PathValue("action")
	a, ok := actions[name]
	if !ok {
		c.notFound(w, r)
		return
	}
	sb, err := c.svc.Sandbox(r.Context(), v.caller, r.PathValue("id"))
	if err != nil {
		c.fail(w, r, &v, err)
		return
	}
	data := map[string]any{"Action": a, "Name": name, "SB": sb, "Post": Prefix + "/sandboxes/" + sb.ID + "/" + name,
		"Cancel": Prefix + "/sandboxes/" + sb.ID}
	if name == "ttl" {
		ttl, err := readTTL(r.URL.Query().Get("ttl"))
		if err != nil {
			c.fail(w, r, &v, err)
			return
		}
		data["TTL"] = ttl
	}
	c.render(w, r, http.StatusOK, "confirm", &v, data)
}

// act carries out a confirmed action through the sandbox service and goes back to
// the sandbox's page.
func (c *Console) act(w http.ResponseWriter, r *http.Request, v view) {
	id, name := r.PathValue("id"), r.PathValue("action")
	ctx := r.Context()
	var err error
	switch name {
	case "stop":
		_, err = c.svc.Operate(ctx, v.caller, id, lifecycle.OpStop)
	case "delete":
		_, _, err = c.svc.Delete(ctx, v.caller, id)
	case "ttl":
		var ttl int64
		if ttl, err = readTTL(r.PostForm.Get("ttl")); err == nil {
			_, err = c.svc.Update(ctx, v.caller, id, sandboxesPatchTTL(ttl))
		}
	default:
		c.notFound(w, r)
		return
	}
	if err != nil {
		c.fail(w, r, &v, err)
		return
	}
	http.Redirect(w, r, Prefix+"/sandboxes/"+url.PathEscape(id)+"?done="+name, http.StatusSeeOther)
}

// poolRow is one pool on the pools page.
type poolRow struct {
	Pool             store.Pool
	View             *pools.View
	Sandboxes        int
	Warm             []pooladmin.WarmCount
	Starting, Queued int
}

func (c *Console) poolsData(r *http.Request, v view) (map[string]any, error) {
	ps, err := c.pools.List(r.Context())
	if err != nil {
		return nil, err
	}
	starting, queued, unplaced, partial, err := c.counts(r, v)
	if err != nil {
		return nil, err
	}
	rows := make([]poolRow, 0, len(ps))
	for _, p := range ps {
		rows = append(rows, poolRow{Pool: p.Pool, View: p.View, Sandboxes: p.Sandboxes, Warm: p.Warm,
			Starting: starting[p.Pool.Name], Queued: queued[p.Pool.Name]})
	}
	return map[string]any{"Pools": rows, "Unplaced": unplaced, "Partial": partial}, nil
}

// counts tallies the provisioning and queued sandboxes by pool; queued ones not yet
// placed count as unplaced. partial is set when there were more than countPages
// pages.
func (c *Console) counts(r *http.Request, v view) (starting, queued map[string]int, unplaced int, partial bool, err error) {
	starting, queued = map[string]int{}, map[string]int{}
	f := store.SandboxFilter{States: []store.State{store.StateQueued, store.StateProvisioning}, Limit: store.MaxLimit}
	for range countPages {
		list, next, err := c.svc.List(r.Context(), v.caller, f)
		if err != nil {
			return nil, nil, 0, false, err
		}
		for _, sb := range list {
			switch {
			case sb.State == store.StateProvisioning:
				starting[sb.Pool]++
			case sb.Pool == "":
				unplaced++
			default:
				queued[sb.Pool]++
			}
		}
		if next == "" {
			return starting, queued, unplaced, false, nil
		}
		f.Cursor = next
	}
	return starting, queued, unplaced, true, nil
}

func (c *Console) poolsPage(w http.ResponseWriter, r *http.Request, v view) {
	if c.pools == nil {
		c.notFound(w, r)
		return
	}
	data, err := c.poolsData(r, v)
	if err != nil {
		c.fail(w, r, &v, err)
		return
	}
	c.render(w, r, http.StatusOK, "pools", &v, data)
}

func (c *Console) poolsLive(w http.ResponseWriter, r *http.Request, v view) { c.poolsPage(w, r, v) }

func (c *Console) trustPage(w http.ResponseWriter, r *http.Request, v view) {
	if c.pools == nil {
		c.notFound(w, r)
		return
	}
	rep, err := c.pools.Trust(r.Context())
	if err != nil {
		c.fail(w, r, &v, err)
		return
	}
	c.render(w, r, http.StatusOK, "trust", &v, rep)
}

// passesPerPage is how many recorded passes the reconcile page shows at once.
const passesPerPage = 20

// passRow is one recorded pass as the reconcile page shows it.
type passRow struct {
	store.ReconcilePass
	// By is who started it: "leader (periodic)" or "token:<id>".
	By string
}

// reconcileData is what the reconcile page shows: the recorded passes from cursor
// on, and an error of a pass just asked for.
func (c *Console) reconcileData(r *http.Request, confirm bool, failed string) (map[string]any, error) {
	data := map[string]any{"Available": c.reconcile != nil, "Confirm": confirm, "Failed": failed,
		"Recorded": c.passes != nil}
	if c.passes == nil {
		return data, nil
	}
	cursor := r.URL.Query().Get("cursor")
	items, next, err := c.passes(r.Context(), store.ReconcilePassFilter{Cursor: cursor, Limit: passesPerPage})
	if err != nil {
		return nil, err
	}
	rows := make([]passRow, 0, len(items))
	for _, p := range items {
		by := "periodic, the leader"
		if p.Trigger == store.TriggerOnDemand {
			by = "on demand, token:" + p.TokenID
		}
		rows = append(rows, passRow{ReconcilePass: p, By: by})
	}
	data["Passes"], data["Next"], data["Paged"] = rows, next, cursor != ""
	return data, nil
}

func (c *Console) reconcilePage(w http.ResponseWriter, r *http.Request, v view) {
	c.showReconcile(w, r, v, http.StatusOK, false, "")
}

func (c *Console) reconcileConfirm(w http.ResponseWriter, r *http.Request, v view) {
	c.showReconcile(w, r, v, http.StatusOK, true, "")
}

func (c *Console) showReconcile(w http.ResponseWriter, r *http.Request, v view, status int, confirm bool, failed string) {
	data, err := c.reconcileData(r, confirm, failed)
	if err != nil {
		c.fail(w, r, &v, err)
		return
	}
	c.render(w, r, status, "reconcile", &v, data)
}

// reconcileNow runs a pass, which the reconciler records with who asked, and shows
// the recorded passes; a pass that could not run is shown with its reason.
func (c *Console) reconcileNow(w http.ResponseWriter, r *http.Request, v view) {
	if c.reconcile == nil {
		c.errorPage(w, r, &v, http.StatusServiceUnavailable, "The reconciler is not running on this replica.")
		return
	}
	if _, err := c.reconcile(r.Context(), v.caller.TokenID); err != nil {
		status, msg := http.StatusInternalServerError, "internal error; the daemon's log has the details"
		if e := api.AsError(err); e != nil {
			status, msg = e.HTTPStatus(), e.Message
		} else {
			c.log.Error("console: reconcile", "error", err)
		}
		c.showReconcile(w, r, v, status, false, msg)
		return
	}
	http.Redirect(w, r, Prefix+"/reconcile", http.StatusSeeOther)
}

func sandboxesPatchTTL(ttl int64) sandboxes.Patch { return sandboxes.Patch{TTLSeconds: &ttl} }
