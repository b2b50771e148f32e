package pooladmin

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// TrustReport is which pools receive work under the placement policy, and why the
// others do not: GET /v1/admin/trust-report and the console's trust page both show
// it, so it is decided here once.
type TrustReport struct {
	AllowExternal bool
	ExternalPools []string
	Pools         []TrustEntry
}

// TrustEntry is one pool of a TrustReport. AdapterClaim and Isolation are empty
// when the adapter was not built or probed yet.
type TrustEntry struct {
	Name, Adapter           string
	Trust                   api.Trust
	AdapterClaim, Isolation string
	ReceivesWork            bool
	Note                    string
}

// Trust reports, for every stored or declared pool sorted by name, its trust, what
// its adapter claims, and whether the policy lets it receive work.
func (s *Service) Trust(ctx context.Context) (TrustReport, error) {
	policy, err := s.st.GetPolicy(ctx)
	if err != nil {
		return TrustReport{}, err
	}
	stored, err := s.st.ListPools(ctx)
	if err != nil {
		return TrustReport{}, err
	}
	byName := map[string]store.Pool{}
	for _, p := range stored {
		byName[p.Name] = p
	}
	views := map[string]pools.View{}
	for _, v := range s.pools.Views() {
		views[v.Pool.Name] = v
		if _, ok := byName[v.Pool.Name]; !ok {
			byName[v.Pool.Name] = v.Pool
		}
	}
	out := TrustReport{AllowExternal: policy.AllowExternal, ExternalPools: slices.Clone(policy.ExternalPools)}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		p := byName[name]
		listed := slices.Contains(policy.ExternalPools, name)
		e := TrustEntry{Name: name, Adapter: p.Adapter, Trust: p.Trust,
			ReceivesWork: p.Trust != api.TrustExternal || policy.AllowExternal && listed}
		var note string
		if v, ok := views[name]; ok && v.Adapter != nil {
			e.AdapterClaim = string(v.Info.Trust)
			e.Isolation = v.Info.Isolation
			if v.Info.Trust != "" && v.Info.Trust != p.Trust {
				note = fmt.Sprintf("the adapter claims %s; the operator's setting (%s) applies", v.Info.Trust, p.Trust)
			}
		} else {
			note = "adapter not built or not probed yet"
		}
		if p.Trust == api.TrustExternal {
			switch {
			case !policy.AllowExternal:
				note = joinNote(note, "external, and the policy does not allow external placement")
			case !listed:
				note = joinNote(note, "external, and not listed in externalPools")
			}
		}
		e.Note = note
		out.Pools = append(out.Pools, e)
	}
	return out, nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
