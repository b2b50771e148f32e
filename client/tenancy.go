package client

import "context"

// Projects and profiles. These are admin calls: a project token gets a 403 APIError.

// ListProjects returns every project, declared or implicit (a project some sandbox
// names without a PUT), sorted by org then name, each with its usage and cost.
func (c *Client) ListProjects(ctx context.Context) ([]Project, error) {
	l, err := decode[ProjectList](c.API.ClientInterface.ListProjects(ctx))
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// GetProject returns the project org/project. Any valid name answers: a project that
// was never put has Declared false and a zero (unlimited) quota.
func (c *Client) GetProject(ctx context.Context, org, project string) (*Project, error) {
	return decode[Project](c.API.ClientInterface.GetProject(ctx, org, project))
}

// PutProject declares the project org/project or replaces its quota (0 = unlimited).
// A quota below the current usage refuses new sandboxes only.
func (c *Client) PutProject(ctx context.Context, org, project string, body ProjectSpec) (*Project, error) {
	return decode[Project](c.API.ClientInterface.PutProject(ctx, org, project, body))
}

// DeleteProject removes the project's declaration (its quota). A project never put is
// a 404 APIError (except to a retry after a connection broke before the answer: the
// first attempt removed it); one with sandboxes that are not terminated is a 409.
func (c *Client) DeleteProject(ctx context.Context, org, project string) error {
	return expectDeleted(c.API.ClientInterface.DeleteProject(ctx, org, project))
}

// ListProfiles returns every profile, sorted by name.
func (c *Client) ListProfiles(ctx context.Context) ([]Profile, error) {
	l, err := decode[ProfileList](c.API.ClientInterface.ListProfiles(ctx))
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// GetProfile returns the named profile; an unknown name is a 404 APIError.
func (c *Client) GetProfile(ctx context.Context, name string) (*Profile, error) {
	return decode[Profile](c.API.ClientInterface.GetProfile(ctx, name))
}

// PutProfile creates or replaces the named profile. The daemon stores the
// capabilities sorted and without duplicates.
func (c *Client) PutProfile(ctx context.Context, name string, body ProfileSpec) (*Profile, error) {
	return decode[Profile](c.API.ClientInterface.PutProfile(ctx, name, body))
}

// DeleteProfile removes the named profile; an unknown name is a 404 APIError, except
// to a retry after a connection broke before the answer: the first attempt removed
// it. Sandboxes made from it keep what it gave them.
func (c *Client) DeleteProfile(ctx context.Context, name string) error {
	return expectDeleted(c.API.ClientInterface.DeleteProfile(ctx, name))
}
