package client

import "context"

// The admin calls need an admin token; a project token gets a 403 APIError.

// ListPools returns every pool.
func (c *Client) ListPools(ctx context.Context) ([]Pool, error) {
	l, err := decode[PoolList](c.API.ClientInterface.ListPools(ctx))
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// GetPool returns one pool.
func (c *Client) GetPool(ctx context.Context, name string) (*Pool, error) {
	return decode[Pool](c.API.ClientInterface.GetPool(ctx, name))
}

// CreatePool registers a pool; an existing name is a 409 APIError.
func (c *Client) CreatePool(ctx context.Context, spec PoolSpec) (*Pool, error) {
	return decode[Pool](c.API.ClientInterface.CreatePool(ctx, spec))
}

// PutPool replaces the definition of the existing pool called name; use CreatePool
// for a new one. An unknown name is a 404 APIError; a spec naming another pool or
// another adapter (neither can change) is a 400, and a pool the daemon's config file
// defines is a 409.
func (c *Client) PutPool(ctx context.Context, name string, spec PoolSpec) (*Pool, error) {
	return decode[Pool](c.API.ClientInterface.PutPool(ctx, name, spec))
}

// PatchPool changes the fields set in patch.
func (c *Client) PatchPool(ctx context.Context, name string, patch PoolPatch) (*Pool, error) {
	return decode[Pool](c.API.ClientInterface.PatchPool(ctx, name, patch))
}

// DeletePool removes a pool. Without force a pool that still has sandboxes is a 409
// APIError. An unknown name is a 404 APIError, except to a retry after a connection
// broke before the answer: the first attempt removed it.
func (c *Client) DeletePool(ctx context.Context, name string, force bool) error {
	var params DeletePoolParams
	if force {
		params.Force = &force
	}
	return expectDeleted(c.API.ClientInterface.DeletePool(ctx, name, &params))
}

// GetPolicy returns the deployment-wide placement policy.
func (c *Client) GetPolicy(ctx context.Context) (*Policy, error) {
	return decode[Policy](c.API.ClientInterface.GetPolicy(ctx))
}

// PutPolicy replaces the placement policy.
func (c *Client) PutPolicy(ctx context.Context, p Policy) (*Policy, error) {
	return decode[Policy](c.API.ClientInterface.PutPolicy(ctx, p))
}

// CreateToken issues a token; the secret is in the answer and nowhere else.
func (c *Client) CreateToken(ctx context.Context, body TokenCreate) (*TokenCreated, error) {
	return decode[TokenCreated](c.API.ClientInterface.CreateToken(ctx, body))
}

// ListTokens returns every token's metadata (never a secret).
func (c *Client) ListTokens(ctx context.Context) ([]Token, error) {
	l, err := decode[TokenList](c.API.ClientInterface.ListTokens(ctx))
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// DeleteToken revokes a token. An unknown id is a 404 APIError, except to a retry
// after a connection broke before the answer: the first attempt revoked it.
func (c *Client) DeleteToken(ctx context.Context, id string) error {
	return expectDeleted(c.API.ClientInterface.DeleteToken(ctx, id))
}

// GetTrustReport says, pool by pool, where work may go under the current policy.
func (c *Client) GetTrustReport(ctx context.Context) (*TrustReport, error) {
	return decode[TrustReport](c.API.ClientInterface.GetTrustReport(ctx))
}

// ListReconcilePasses returns one page of the recorded reconcile passes, newest
// first: the leader's periodic ones and those asked for. Pass the page's
// NextCursor back as params.Cursor for the next; nil params is the first page.
func (c *Client) ListReconcilePasses(ctx context.Context, params *ListReconcilePassesParams) (*ReconcilePassList, error) {
	return decode[ReconcilePassList](c.API.ClientInterface.ListReconcilePasses(ctx, params))
}

// ReconcileNow runs one reconciliation of every pool against its backend now.
func (c *Client) ReconcileNow(ctx context.Context) (*ReconcileReport, error) {
	return decode[ReconcileReport](c.API.ClientInterface.ReconcileNow(ctx))
}
