package placement

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/textcut"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// filter names one check of Place. Static filters depend only on the request, the
// pool's definition and the policy: a pool failing one will not take the sandbox
// later either. Transient filters (health or an open breaker, maxConcurrency,
// capacity) may pass later,
// so a sandbox failing only those waits instead of failing.
type filter int

const (
	fAllowedPools filter = iota
	fSnapshotPool
	fTrust
	fAdapter
	fCapabilities
	fTemplate
	fLimits
	fRegions
	// Transient filters follow.
	fHealth
	fConcurrency
	fCapacity
)

func (f filter) transient() bool { return f >= fHealth }

type rejection struct {
	filter filter
	reason string
}

// Place decides which pools can take a sandbox now, best first, or why none can.
// It is pure: views, policy and active (the non-terminal sandbox count per pool,
// for maxConcurrency) are all it looks at, so the same inputs always give the same
// decision.
//
// Reasons reach tenants (create answers, a waiting sandbox's reason), so a pool's
// health is said without its lastError, which may name internal hosts; operators
// read it on the pool.
//
// Every pool is checked against every static filter; Rejected records the first
// failure, in the order scope (allowedPools, snapshot pool, trust), adapter,
// capabilities, template, limits, regions. Only pools passing all of them meet the
// transient filters (health, maxConcurrency, capacity).
//
// With no pool passing, the sandbox waits (Wait) when some pool failed only
// transient filters. Otherwise the decision fails with Code
// api.CodeUnsupportedCapability when capabilities are the only reason: at least one
// pool fails the capability filter and no other static filter, so that dropping the
// requested capabilities would have made it eligible. Any other static failure is
// api.CodeInvalidRequest. A pool the sandbox may not use at all (not in
// allowedPools, not the snapshot's pool, external and not allowed) therefore never
// turns a failure into unsupported_capability.
func Place(req Request, views []pools.View, policy store.Policy, active map[string]int) Decision {
	if len(views) == 0 {
		return Decision{Code: api.CodeInvalidRequest, Reason: "no pools are registered"}
	}
	unknown := unknownPools(req.Placement.AllowedPools, views)
	if len(unknown) > 0 && !slices.ContainsFunc(views, func(v pools.View) bool { return slices.Contains(req.Placement.AllowedPools, v.Pool.Name) }) {
		// Not one pool named exists: the likely cause is a typo, which every pool
		// refused as "not in allowedPools" would hide.
		return Decision{Code: api.CodeInvalidRequest, Reason: "allowedPools " + unknown.String(views)}
	}
	d := Decision{Rejected: map[string]string{}}
	var passed, waiting []pools.View
	capabilitiesOnly := false
	for _, v := range views {
		static := staticRejections(req, v, policy)
		if r, ok := unknownYet(v, static); ok {
			// Refused only for what the pool's adapter would tell, which it has not
			// told yet: the sandbox waits for it rather than fail.
			d.Rejected[v.Pool.Name] = r.reason
			waiting = append(waiting, v)
			continue
		}
		if len(static) > 0 {
			d.Rejected[v.Pool.Name] = static[0].reason
			if len(static) == 1 && static[0].filter == fCapabilities {
				capabilitiesOnly = true
			}
			continue
		}
		if r, ok := transientRejection(req, v, active[v.Pool.Name]); ok {
			d.Rejected[v.Pool.Name] = r.reason
			waiting = append(waiting, v)
			continue
		}
		passed = append(passed, v)
	}
	switch {
	case len(passed) > 0:
		rank(passed, req, active)
		for _, v := range passed {
			d.Pools = append(d.Pools, v.Pool.Name)
		}
	case len(waiting) > 0:
		d.Wait = true
		d.Reason = "waiting for capacity: " + listReasons(waiting, d.Rejected)
	default:
		d.Code = api.CodeInvalidRequest
		if capabilitiesOnly {
			d.Code = api.CodeUnsupportedCapability
		}
		d.Reason = "no pool can place this sandbox: " + listReasons(views, d.Rejected)
	}
	if d.Reason != "" && len(unknown) > 0 {
		d.Reason += "; allowedPools also " + unknown.String(views)
	}
	return d
}

// unknown are names in allowedPools that no pool has.
type unknown []string

func unknownPools(allowed []string, views []pools.View) unknown {
	var out unknown
	for _, name := range allowed {
		if !slices.ContainsFunc(views, func(v pools.View) bool { return v.Pool.Name == name }) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// Bounds on what unknown.String quotes of the request: the names are the caller's,
// of any length and number.
const (
	maxUnknownShown = 5
	maxNameShown    = 80
)

// String says which names do not exist and, for each, the existing pool name it is
// most likely a typo of.
func (u unknown) String(views []pools.View) string {
	parts := make([]string, 0, min(len(u), maxUnknownShown)+1)
	for _, name := range u[:min(len(u), maxUnknownShown)] {
		shown := textcut.Prefix(name, maxNameShown)
		if shown != name {
			shown += "..."
		}
		part := strconv.Quote(shown)
		if near := nearest(name, views); near != "" {
			part += " (did you mean " + strconv.Quote(near) + "?)"
		}
		parts = append(parts, part)
	}
	if len(u) > maxUnknownShown {
		parts = append(parts, fmt.Sprintf("and %d more", len(u)-maxUnknownShown))
	}
	verb := "names a pool that does not exist: "
	if len(u) > 1 {
		verb = "names pools that do not exist: "
	}
	return verb + strings.Join(parts, ", ")
}

// nearest returns the pool name closest to name by edit distance, when it is close
// enough to be a typo (at most a third of the name's length, and at least one edit
// allowed); ties go to the first name in order.
func nearest(name string, views []pools.View) string {
	if len(name) > maxNameShown {
		// Far longer than any pool name (a DNS label): no typo of one, and the
		// distance would cost its length times each name's.
		return ""
	}
	names := make([]string, 0, len(views))
	for _, v := range views {
		names = append(names, v.Pool.Name)
	}
	slices.Sort(names)
	best, bestDist := "", max(1, len([]rune(name))/3)+1
	for _, n := range names {
		if d := editDistance(strings.ToLower(name), n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions, deletions,
// substitutions and transpositions of adjacent characters each cost one, so that
// "devhots" is one edit from "devhost".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

func listReasons(views []pools.View, rejected map[string]string) string {
	names := make([]string, 0, len(views))
	for _, v := range views {
		names = append(names, v.Pool.Name)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, "pool "+n+": "+rejected[n])
	}
	return strings.Join(parts, "; ")
}

func staticRejections(req Request, v pools.View, policy store.Policy) []rejection {
	var out []rejection
	add := func(f filter, format string, args ...any) {
		out = append(out, rejection{f, fmt.Sprintf(format, args...)})
	}
	name := v.Pool.Name
	if allowed := req.Placement.AllowedPools; len(allowed) > 0 && !slices.Contains(allowed, name) {
		add(fAllowedPools, "not in allowedPools")
	}
	if req.SnapshotPool != "" && req.SnapshotPool != name {
		add(fSnapshotPool, "the snapshot to restore is on pool %s", req.SnapshotPool)
	}
	if v.Trust == api.TrustExternal {
		switch {
		case !policy.AllowExternal:
			add(fTrust, "external pool, and the policy does not allow external placement")
		case !slices.Contains(policy.ExternalPools, name):
			add(fTrust, "external pool not listed in the policy's externalPools")
		}
	}
	if v.Adapter == nil {
		add(fAdapter, "adapter not available")
	}
	caps := v.Capabilities
	var missing []string
	for _, c := range req.Capabilities {
		if !slices.Contains(caps.Features, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		add(fCapabilities, "missing capabilities: %s", strings.Join(missing, ", "))
	}
	if req.Template != "" && len(caps.Templates) > 0 && !slices.Contains(caps.Templates, req.Template) {
		add(fTemplate, "template %q not offered", req.Template)
	}
	r := req.Resources
	switch {
	case caps.MaxCPU > 0 && r.CPU > caps.MaxCPU:
		add(fLimits, "cpu %v is over the pool's limit of %v", r.CPU, caps.MaxCPU)
	case caps.MaxMemoryMiB > 0 && r.MemoryMiB > caps.MaxMemoryMiB:
		add(fLimits, "memoryMiB %d is over the pool's limit of %d", r.MemoryMiB, caps.MaxMemoryMiB)
	case caps.MaxDiskGiB > 0 && r.DiskGiB > caps.MaxDiskGiB:
		add(fLimits, "diskGiB %d is over the pool's limit of %d", r.DiskGiB, caps.MaxDiskGiB)
	}
	if regions := req.Placement.Regions; len(regions) > 0 && !slices.ContainsFunc(regions, func(r string) bool { return inRegion(v, r) }) {
		add(fRegions, "not in regions %s", strings.Join(regions, ", "))
	}
	return out
}

// unknownYet reports whether a pool failed static filters only because its adapter
// is not there to say what it offers: built but not yet probed, or not built for a
// reason that may pass (a credential variable unset, a config being fixed; a kind
// this build lacks does not). Then the failures are not the pool's answer, and the
// pool counts as waiting. Filters on the pool's definition (scope, trust, regions)
// still refuse.
func unknownYet(v pools.View, static []rejection) (rejection, bool) {
	var reason string
	switch {
	case v.Adapter == nil && !v.KindMissing:
		reason = "adapter not available yet"
	case v.Adapter != nil && v.AwaitingProbe:
		reason = "not probed yet"
	default:
		return rejection{}, false
	}
	if len(static) == 0 {
		return rejection{}, false
	}
	for _, r := range static {
		switch r.filter {
		case fAdapter, fCapabilities, fTemplate, fLimits:
		default:
			return rejection{}, false
		}
	}
	return rejection{fHealth, reason}, true
}

func transientRejection(req Request, v pools.View, active int) (rejection, bool) {
	switch {
	case !v.Healthy:
		return rejection{fHealth, "unhealthy"}, true
	case v.Breaker.State == pools.BreakerOpen:
		return rejection{fHealth, fmt.Sprintf("paused after %d failed creates in a row, until %s",
			v.Breaker.ConsecutiveFailures, v.Breaker.OpenUntil.UTC().Format(time.RFC3339))}, true
	case v.Pool.MaxConcurrency > 0 && active >= v.Pool.MaxConcurrency:
		return rejection{fConcurrency, fmt.Sprintf("at maxConcurrency (%d)", v.Pool.MaxConcurrency)}, true
	case !v.Capacity.Fits(req.Resources):
		return rejection{fCapacity, "no capacity"}, true
	}
	return rejection{}, false
}

// rank sorts eligible pools: the preferred region (the first requested) first, then
// a half-open pool whose trial Creates are all in flight last (BeginCreate would
// refuse it), then the roomiest, then the cheapest, then one that isolates its
// sandboxes (a container or a microVM) before one that does not, then by name so
// that equal pools keep a stable order across replicas.
//
// A half-open pool that can take a trial ranks as a closed one would: were it ranked
// after every closed pool, it would get its trial only once all of them were full,
// and a recovered pool could stay half-open, without traffic, indefinitely.
func rank(vs []pools.View, req Request, active map[string]int) {
	preferred := ""
	if len(req.Placement.Regions) > 0 {
		preferred = req.Placement.Regions[0]
	}
	slices.SortStableFunc(vs, func(a, b pools.View) int {
		if preferred != "" {
			pa, pb := inRegion(a, preferred), inRegion(b, preferred)
			if pa != pb {
				if pa {
					return -1
				}
				return 1
			}
		}
		if ta, tb := trialsFull(a), trialsFull(b); ta != tb {
			if tb {
				return -1
			}
			return 1
		}
		if fa, fb := freeCPU(a), freeCPU(b); fa != fb {
			if fa > fb {
				return -1
			}
			return 1
		}
		if la, lb := load(a, active), load(b, active); la != lb {
			if la < lb {
				return -1
			}
			return 1
		}
		if ca, cb := cost(a, req), cost(b, req); ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		// Among pools alike in all else, the one that isolates: what a sandbox
		// runs is kept from the host where nothing says otherwise.
		if ia, ib := isolates(a), isolates(b); ia != ib {
			if ia {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Pool.Name, b.Pool.Name)
	})
}

// isolates reports whether a pool declares that its sandboxes run isolated from the
// host: in containers or microVMs.
func isolates(v pools.View) bool {
	f := v.Capabilities.Features
	return (slices.Contains(f, adapters.FeatureContainer) || slices.Contains(f, adapters.FeatureMicroVM)) &&
		!slices.Contains(f, adapters.FeatureIsolationNone)
}

// trialsFull reports whether the pool is half-open with every trial Create it allows
// in flight.
func trialsFull(v pools.View) bool {
	return v.Breaker.State == pools.BreakerHalfOpen && v.Breaker.TrialsFull
}

// inRegion reports whether the pool's own region or one its adapter declares is r.
func inRegion(v pools.View, r string) bool {
	return v.Pool.Region == r || slices.Contains(v.Capabilities.Regions, r)
}

// freeCPU is the room a pool reports; an unbounded pool has plenty, so it outranks
// any bounded one on this key and maxConcurrency load decides between unbounded ones.
func freeCPU(v pools.View) float64 {
	if !v.Capacity.Bounded {
		return math.Inf(1)
	}
	return v.Capacity.FreeCPU
}

// load is how full a pool is against its maxConcurrency; a pool without a limit is
// never full.
func load(v pools.View, active map[string]int) float64 {
	if v.Pool.MaxConcurrency <= 0 {
		return 0
	}
	return float64(active[v.Pool.Name]) / float64(v.Pool.MaxConcurrency)
}

// cost is the hourly price of the request on the pool's cost model.
func cost(v pools.View, req Request) float64 {
	m := v.Pool.CostModel
	return m.CPUHour*req.Resources.CPU + m.MemoryGiBHour*float64(req.Resources.MemoryMiB)/1024
}
