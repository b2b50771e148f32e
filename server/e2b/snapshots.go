package e2b

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/store"
)

// E2B's snapshots are Differently's disk snapshots. E2B names a snapshot as a
// template (Sandbox.create(snapshotID), deleteSnapshot through DELETE
// /templates/{id}); a templateID with snapshotPrefix names one, which no profile
// name can (they hold no "_"). E2B's snapshot names (aliases) are not kept.
const snapshotPrefix = "snap_"

func isSnapshotID(templateID string) bool { return strings.HasPrefix(templateID, snapshotPrefix) }

// snapshotInfo is E2B's SnapshotInfo.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func toSnapshotInfo(sn store.Snapshot) snapshotInfo {
	return snapshotInfo{SnapshotID: sn.ID, Names: []string{}}
}

type snapshotBody struct {
	Name string `json:"name"`
}

// createSnapshot takes a disk snapshot of the sandbox through the pool's adapter.
func (h *handler) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var body snapshotBody
	if err := h.decode(w, r, &body, true); err != nil {
		h.writeError(w, r, err)
		return
	}
	if body.Name != "" {
		h.writeError(w, r, apierr.Invalid("snapshot names are not supported: create sandboxes from the snapshotID this answers"))
		return
	}
	sb, err := h.live(r, chi.URLParam(r, "id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	sn, err := h.svc.CreateSnapshot(r.Context(), callerOf(r.Context()), sb.ID, nil)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSnapshotInfo(sn))
}

// listSnapshots lists one sandbox's snapshots (sandboxID is required: Differently
// lists snapshots by sandbox), oldest first, in pages of limit with the
// X-Next-Token header. name matches a snapshot's ID, snapshots having no other name.
func (h *handler) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sandboxID := q.Get("sandboxID")
	if sandboxID == "" {
		h.writeError(w, r, apierr.Invalid("sandboxID is required: Differently lists the snapshots of one sandbox at a time"))
		return
	}
	limit := maxListLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			h.writeError(w, r, apierr.Invalid("limit must be a whole number from 1 to %d", maxListLimit))
			return
		}
		limit = n
	}
	all, err := h.svc.Snapshots(r.Context(), callerOf(r.Context()), sandboxID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	slices.SortFunc(all, func(a, b store.Snapshot) int { return strings.Compare(a.ID, b.ID) })
	after, name := q.Get("nextToken"), q.Get("name")
	out := []snapshotInfo{}
	for _, sn := range all {
		if sn.ID <= after || name != "" && sn.ID != name {
			continue
		}
		if len(out) == limit {
			// More remain: the next page starts after the last one given.
			w.Header().Set("X-Next-Token", out[len(out)-1].SnapshotID)
			break
		}
		out = append(out, toSnapshotInfo(sn))
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteTemplate is DELETE /templates/{id}, which the SDK's deleteSnapshot sends:
// a snapshot's ID deletes the snapshot (404 when unknown, which makes
// deleteSnapshot answer false); templates are not served.
func (h *handler) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "template")
	if !isSnapshotID(id) {
		writeUnserved(w, r, whyTemplates)
		return
	}
	if err := h.svc.DeleteSnapshot(r.Context(), callerOf(r.Context()), id); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// templateAliasResponse is E2B's TemplateAliasResponse.
type templateAliasResponse struct {
	TemplateID string `json:"templateID"`
	Public     bool   `json:"public"`
}

// templateAlias answers whether a templateID names something a create can start
// from (the SDK's Template.exists): base, a profile, or a snapshot of the caller's
// project. Profiles are the operator's, shared by all projects, so not public.
func (h *handler) templateAlias(w http.ResponseWriter, r *http.Request) {
	alias := chi.URLParam(r, "alias")
	ctx := r.Context()
	switch {
	case alias == BaseTemplate:
		writeJSON(w, http.StatusOK, templateAliasResponse{TemplateID: alias, Public: true})
		return
	case isSnapshotID(alias):
		if _, err := h.svc.Snapshot(ctx, callerOf(ctx), alias); err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, templateAliasResponse{TemplateID: alias})
		return
	}
	ok, err := h.svc.ProfileExists(ctx, alias)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !ok {
		h.writeError(w, r, api.Errorf(api.CodeNotFound, "template %q not found: no profile has that name", alias))
		return
	}
	writeJSON(w, http.StatusOK, templateAliasResponse{TemplateID: alias})
}
