// Package apierr builds the *api.Error answers that the server's services give most
// often, so that the API, the sandbox service and the pool admin service answer alike.
// It imports only package api, so any server package may use it.
package apierr

import "github.com/different-ai/differently/api"

// Invalid answers a request that can never succeed as written: 400 invalid_request.
func Invalid(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidRequest, format, args...)
}

// Conflict answers a request that the object's present state forbids, or that
// clashes with another object: 409 invalid_state.
func Conflict(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidState, format, args...)
}
