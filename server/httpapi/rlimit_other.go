//go:build !unix

package httpapi

// openFileLimit is unknown outside Unix: DefaultMaxConnections takes its ceiling.
func openFileLimit() (uint64, bool) { return 0, false }
