package adapters

import (
	"context"

	"github.com/different-ai/differently/api"
)

// DeleteInstance deletes the instance ref through a and reports whether it is gone.
// The contract forbids not_found from Delete (a missing instance is a success), so
// one says the adapter or what stands behind it is wrong: a 404 from a route of a
// misconfigured endpoint, or from a sub-resource the adapter cleans up first. Taken
// at its word it would have the control plane mark a sandbox terminated, or drop an
// orphan, while the instance runs on and costs money, out of sight. The instance is
// asked for instead: gone only when Get says so too.
func DeleteInstance(ctx context.Context, a ExecutionAdapter, ref string) error {
	err := a.Delete(ctx, ref)
	if !api.IsCode(err, api.CodeNotFound) {
		return err
	}
	_, gerr := a.Get(ctx, ref)
	switch {
	case api.IsCode(gerr, api.CodeNotFound):
		return nil
	case gerr != nil:
		return gerr
	}
	return Unavailable("delete of %s answered not_found, which the adapter contract forbids, yet the instance is still there: %s",
		ref, api.AsError(err).Message)
}
