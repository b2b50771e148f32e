package adapters

import (
	"fmt"

	"github.com/different-ai/differently/api"
)

// NotFound: the instance, snapshot or file does not exist.
func NotFound(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeNotFound, format, args...)
}

// Unsupported: the backend cannot perform operation at all. The operation name goes
// into the details so the API can report it.
func Unsupported(operation string) *api.Error {
	return (&api.Error{
		Code:    api.CodeUnsupportedOperation,
		Message: fmt.Sprintf("%s is not supported by this backend", operation),
	}).WithDetail("operation", operation)
}

// Unavailable: the backend is unreachable, timed out, rejected the credentials or
// failed. Never put a credential in the message.
func Unavailable(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeProviderUnavailable, format, args...)
}

// InsufficientCapacity: no room right now; a retry later may succeed.
func InsufficientCapacity(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInsufficientCapacity, format, args...)
}

// SandboxFailed: the backend works, but this one sandbox failed.
func SandboxFailed(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeSandboxFailed, format, args...)
}

// InvalidRequest: the request can never succeed as written.
func InvalidRequest(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidRequest, format, args...)
}

// InvalidState: the instance is in the wrong state for the call.
func InvalidState(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidState, format, args...)
}

// TooLarge: a file or body is over a limit of package api.
func TooLarge(format string, args ...any) *api.Error {
	return api.Errorf(api.CodePayloadTooLarge, format, args...)
}
