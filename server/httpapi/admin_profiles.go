package httpapi

import (
	"context"
	"net/http"
	"slices"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/textcut"
	"github.com/different-ai/differently/server/store"
)

// Profiles are named bundles of sandbox settings managed by operators. A create naming
// one gets the profile's capabilities added to its own, and the profile's resources
// (field by field), template, placement (field by field) and TTL wherever the request
// left them unset. The sandbox records the profile's name; later changes to the profile
// do not reach sandboxes made from it.

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

// validProfileName uses the pools' naming rule (a DNS label). The message quotes no
// more of a bad name than a good one could hold.
func validProfileName(name string) error {
	if !api.ValidName(name) {
		return invalid("profile name %q must be 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit",
			textcut.Prefix(name, 64))
	}
	return nil
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
	if err := validProfileName(name); err != nil {
		s.writeError(w, r, err)
		return
	}
	caps, err := adapters.ValidateRequestedFeatures(deref(body.Capabilities))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := store.Profile{
		Name: name, Capabilities: caps, Resources: deref(body.Resources),
		Template: deref(body.Template), TTLSeconds: deref(body.TtlSeconds),
	}
	if pl := body.Placement; pl != nil {
		p.Placement = store.Placement{AllowedPools: deref(pl.AllowedPools), Regions: deref(pl.Regions)}
		for _, pool := range p.Placement.AllowedPools {
			if err := validPoolName(pool); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
	}
	out, err := s.st.PutProfile(r.Context(), s.now(), p)
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

// applyProfile expands the named profile into a sandbox being created. ttlSet says
// whether the request set ttlSeconds (0, no expiry, included). An unknown profile is
// invalid_request: the request can never succeed as written.
func (s *Server) applyProfile(ctx context.Context, sb *store.Sandbox, name string, ttlSet bool) error {
	p, err := s.st.GetProfile(ctx, name)
	if api.IsCode(err, api.CodeNotFound) {
		return invalid("profile %q not found", name)
	}
	if err != nil {
		return errorf("get profile: %w", err)
	}
	sb.Profile = p.Name
	sb.Capabilities = append(slices.Clone(p.Capabilities), sb.Capabilities...)
	if sb.Template == "" {
		sb.Template = p.Template
	}
	if sb.Resources.CPU == 0 {
		sb.Resources.CPU = p.Resources.CPU
	}
	if sb.Resources.MemoryMiB == 0 {
		sb.Resources.MemoryMiB = p.Resources.MemoryMiB
	}
	if sb.Resources.DiskGiB == 0 {
		sb.Resources.DiskGiB = p.Resources.DiskGiB
	}
	if len(sb.Placement.AllowedPools) == 0 {
		sb.Placement.AllowedPools = slices.Clone(p.Placement.AllowedPools)
	}
	if len(sb.Placement.Regions) == 0 {
		sb.Placement.Regions = slices.Clone(p.Placement.Regions)
	}
	if !ttlSet {
		sb.TTLSeconds = p.TTLSeconds
	}
	return nil
}
