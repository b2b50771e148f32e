package freestyle

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/different-ai/differently/adapters"
)

// listPageSize is how many VMs one List page asks for.
const listPageSize = 100

// listAttempts bounds how often List starts over when the set of VMs changed while
// it was paging.
const listAttempts = 3

type listPage struct {
	VMs        []vmData `json:"vms"`
	TotalCount int      `json:"totalCount"`
}

// List returns every VM whose metadata names installation. It pages with limit and
// offset through every page and fails if any page fails: a partial list would make
// the reconciler think instances were lost.
//
// Offset paging shifts when a VM is created or deleted between two pages, which
// could skip a VM without any error. So every page must report the same totalCount
// and the pages must add up to it; otherwise List starts over, and fails after
// listAttempts tries.
func (a *Adapter) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	if installation == "" {
		return nil, adapters.InvalidRequest("freestyle: list needs an installation")
	}
	for range listAttempts {
		out, stable, err := a.listOnce(ctx, installation)
		if err != nil || stable {
			return out, err
		}
	}
	return nil, adapters.Unavailable("freestyle: the VM list kept changing while it was read (%d attempts)", listAttempts)
}

func (a *Adapter) listOnce(ctx context.Context, installation string) ([]adapters.Instance, bool, error) {
	out := []adapters.Instance{}
	seen := map[string]bool{}
	total := -1
	for offset := 0; ; {
		q := url.Values{
			"metadata": {MetaInstallation + ":" + installation},
			"limit":    {strconv.Itoa(listPageSize)},
			"offset":   {strconv.Itoa(offset)},
		}
		var page listPage
		if err := a.c.JSON(ctx, http.MethodGet, "/v5/vms", q, nil, &page); err != nil {
			return nil, false, err
		}
		if total >= 0 && page.TotalCount != total {
			return nil, false, nil
		}
		total = page.TotalCount
		for _, vm := range page.VMs {
			// The filter is re-checked here: a VM of another installation must never
			// reach the reconciler, which would delete it as an orphan.
			if vm.Metadata[MetaInstallation] != installation || seen[vm.ID] {
				continue
			}
			seen[vm.ID] = true
			out = append(out, vm.instance())
		}
		offset += len(page.VMs)
		if len(page.VMs) == 0 || offset >= total {
			return out, offset == total, nil
		}
	}
}
