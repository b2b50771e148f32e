// Package api holds the wire types shared by the control plane's public API, the
// adapter protocol and every adapter: the error type and its codes, exec requests,
// results and stream events, trust classes and the size limits the whole system enforces.
//
// The package has no dependencies beyond the standard library so that a plugin
// author can import it without pulling in the daemon.
package api
