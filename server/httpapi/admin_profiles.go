package httpapi

import (
	"net/http"
	"slices"

	"github.com/different-ai/differently/server/store"
)

// The profile routes: what a profile is, and the checks a stored one passes, are the
// sandbox service's (server/sandboxes/profiles.go).

func toProfile(p store.Profile) Profile {
	out := Profile{
		Name:         p.Name,
		Capabilities: nonNil(slices.Clone(p.Capabilities)),
		Resources:    p.Resources,
		Template:     strPtr(p.Template),
		TtlSeconds:   p.TTLSeconds,
		CreatedAt:    p.CreatedAt,
		UpdatedAt:    p.UpdatedAt,
	}
	if pl := p.Placement; len(pl.AllowedPools) > 0 || len(pl.Regions) > 0 {
		out.Placement = &Placement{}
		if len(pl.AllowedPools) > 0 {
			out.Placement.AllowedPools = ptr(slices.Clone(pl.AllowedPools))
		}
		if len(pl.Regions) > 0 {
			out.Placement.Regions = ptr(slices.Clone(pl.Regions))
		}
	}
	return out
}

func (s *Server) ListProfiles(w http.ResponseWriter, r *http.Request) {
	ps, err := s.st.ListProfiles(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ProfileList{Items: make([]Profile, 0, len(ps))}
	for _, p := range ps {
		out.Items = append(out.Items, toProfile(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) GetProfile(w http.ResponseWriter, r *http.Request, name string) {
	p, err := s.st.GetProfile(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toProfile(p))
}

func (s *Server) PutProfile(w http.ResponseWriter, r *http.Request, name string) {
	var body ProfileSpec
	if err := decodeJSON(r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	p := store.Profile{
		Name: name, Capabilities: deref(body.Capabilities), Resources: deref(body.Resources),
		Template: deref(body.Template), TTLSeconds: deref(body.TtlSeconds),
	}
	if pl := body.Placement; pl != nil {
		p.Placement = store.Placement{AllowedPools: deref(pl.AllowedPools), Regions: deref(pl.Regions)}
	}
	out, err := s.svc.PutProfile(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toProfile(out))
}

func (s *Server) DeleteProfile(w http.ResponseWriter, r *http.Request, name string) {
	if err := s.st.DeleteProfile(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
