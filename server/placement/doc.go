// Package placement chooses the pools a sandbox may start on. It holds no state and
// does no I/O: Place takes a Request (what the sandbox asks for), the pool manager's
// views, the installation's policy and, optionally, how many live sandboxes each pool
// runs, and returns a Decision.
//
// A Decision is one of three outcomes. Pools lists the pools that can take the
// sandbox now, best first. Wait says that none can now but one could later (every
// candidate is unhealthy, behind an open breaker, at maxConcurrency or out of
// capacity), so the sandbox stays queued with Reason. Otherwise Code and Reason say
// why no pool will ever do, and Rejected names each pool with the filter it failed.
//
// Two callers use it. The scheduler places each queued sandbox with the live counts
// and tries the pools best first (a pool that just failed this sandbox last),
// passing over one whose start slots or breaker refuse. The API calls it without counts when a create arrives, only to refuse at
// once a request no pool could ever serve and to pick pools for a direct create.
//
// Reasons are shown to tenants, so they never quote a pool's lastError.
package placement
