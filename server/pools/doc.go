// Package pools turns the pools stored in the database into adapters the rest of
// the daemon can call, and keeps track of how each one is doing.
//
// A Registry maps adapter kinds to factories. DefaultRegistry holds the kinds built
// in (devhost and fake, allowed only in development mode, remote for an
// out-of-process plugin, and the provider adapters); a custom build may register
// more. The registry also checks a pool's config without building it, which the
// admin API and config validation use to refuse a bad pool before it is stored.
//
// A Manager keeps one View per stored pool. Load reads the pools and builds the
// adapter of each new or changed one, resolving its credential from the environment
// within the operator's allowlist; Refresh does the same and then probes every
// adapter (Capabilities, Health and Capacity). Run repeats Refresh on an interval, so a pool changed through the
// admin API or on another replica is picked up. Views are copies, safe to keep.
//
// Placement reads Views; the scheduler asks BeginCreate before each Create and
// reports the outcome with EndCreate, which feeds the pool's circuit breaker, and
// calls MarkUnhealthy when a backend fails outside a probe. What a view shows of an
// error (LastError, breaker reasons) has the pool's credential removed in every form
// internal/redact knows, since operators and logs read it.
package pools
