package store

import (
	"errors"

	"github.com/different-ai/differently/api"
)

// ErrUnavailable is in the chain of an error that means the database could not be
// reached or dropped the connection: the request may succeed if retried, unlike
// an error in the statement or the data.
var ErrUnavailable = errors.New("the database is unavailable")

// NotFound is the error for a missing row: kind is "sandbox", "pool", ...
func NotFound(kind, id string) *api.Error {
	return api.Errorf(api.CodeNotFound, "%s %q not found", kind, id)
}

// AlreadyExists is the error for a uniqueness conflict.
func AlreadyExists(kind, id string) *api.Error {
	return api.Errorf(api.CodeInvalidState, "%s %q already exists", kind, id)
}

// Conflict is the error for a write that lost a race or is refused in the current state.
func Conflict(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidState, format, args...)
}

// ConfigPool is the error for a change the API may not make to a pool of the daemon's
// config file: the file is the operator's declaration, and the next start would write
// it back over the change.
func ConfigPool(name string) *api.Error {
	return api.Errorf(api.CodeInvalidState,
		"pool %q is defined in the daemon's config file; change or remove it there and restart the daemon, not through the API", name).
		WithDetail("source", string(PoolFromConfig))
}
