package sandboxes

import (
	"context"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/textcut"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/store"
)

// Profiles are named bundles of sandbox settings managed by operators. A create naming
// one gets the profile's capabilities added to its own, and the profile's resources
// (field by field), template, placement (field by field) and TTL wherever the request
// left them unset (applyProfile, create.go). The sandbox records the profile's name;
// later changes to the profile do not reach sandboxes made from it.

// ValidProfileName checks a profile's name, the one a create names and the one an
// admin stores, with the pools' naming rule (a DNS label). The message quotes no
// more of a bad name than a good one could hold.
func ValidProfileName(name string) error {
	if !api.ValidName(name) {
		return apierr.Invalid("profile name %q must be 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit",
			textcut.Prefix(name, 64))
	}
	return nil
}

// ValidPoolName checks a pool's name where an admin writes one: a pool's own, a
// profile's allowed pools, the policy's external pools (server/httpapi/admin.go).
func ValidPoolName(name string) error {
	if !api.ValidName(name) {
		return apierr.Invalid("pool name %q must be 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit", name)
	}
	return nil
}

// ProfileExists reports whether a create may name profile name. Profiles are the
// operator's, shared by every project, so any caller may ask: a create that names
// one tells as much.
func (s *Service) ProfileExists(ctx context.Context, name string) (bool, error) {
	if !api.ValidName(name) {
		return false, nil
	}
	_, err := s.st.GetProfile(ctx, name)
	if api.IsCode(err, api.CodeNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// PutProfile checks a profile and stores it, replacing the one of the same name.
// Its capabilities are checked, sorted and deduplicated the way a create's are
// (adapters.ValidateRequestedFeatures): an unknown one is reported to the admin
// who wrote it, not to every create that names the profile. Its allowed pools need
// not exist yet, but must be names a pool could have.
func (s *Service) PutProfile(ctx context.Context, p store.Profile) (store.Profile, error) {
	if err := ValidProfileName(p.Name); err != nil {
		return store.Profile{}, err
	}
	caps, err := adapters.ValidateRequestedFeatures(p.Capabilities)
	if err != nil {
		return store.Profile{}, err
	}
	p.Capabilities = caps
	for _, pool := range p.Placement.AllowedPools {
		if err := ValidPoolName(pool); err != nil {
			return store.Profile{}, err
		}
	}
	return s.st.PutProfile(ctx, s.now(), p)
}
