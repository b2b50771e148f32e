// Package poolstest is a pool source for the tests of packages that read pools
// (the scheduler, the reconciler, the API) without running a pools.Manager: no
// store, no adapter builds, no probes, no breakers. A test sets the views it wants
// and changes them when it wants; the double records what the scheduler reports.
//
// Pools has every method of the pool sources those packages define (Views, View,
// MarkUnhealthy, BeginCreate and EndCreate), so one value serves any of them. A test
// that needs Refresh, as the API's does, embeds it and replaces the views from
// there.
package poolstest

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/different-ai/differently/server/pools"
)

// Pools serves the views it was given, sorted by pool name as a pools.Manager's are.
// BeginCreate lets every Create through; MarkUnhealthy and EndCreate are recorded
// (Marked, Outcomes) and change no view. It is safe for concurrent use.
type Pools struct {
	// LiveCapacity makes Views and View ask each view's adapter for its capacity,
	// as a probe would, so that placement sees the instances earlier Creates made.
	// Set it before first use.
	LiveCapacity bool

	mu       sync.Mutex
	views    []pools.View
	marked   []string
	outcomes []pools.CreateOutcome
}

// New returns a source serving views (at most one per pool name).
func New(views ...pools.View) *Pools {
	p := &Pools{}
	p.Replace(views...)
	return p
}

// Views returns a copy of every view.
func (p *Pools) Views() []pools.View {
	p.mu.Lock()
	out := slices.Clone(p.views)
	p.mu.Unlock()
	if p.LiveCapacity {
		for i, v := range out {
			if v.Adapter != nil {
				out[i].Capacity, _ = v.Adapter.Capacity(context.Background())
			}
		}
	}
	return out
}

// View returns the view of the named pool.
func (p *Pools) View(name string) (pools.View, bool) {
	for _, v := range p.Views() {
		if v.Pool.Name == name {
			return v, true
		}
	}
	return pools.View{}, false
}

// Replace makes views the only ones served.
func (p *Pools) Replace(views ...pools.View) {
	sorted := slices.Clone(views)
	slices.SortStableFunc(sorted, byName)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.views = sorted
}

// Set adds v, or replaces the view of v's pool.
func (p *Pools) Set(v pools.View) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := p.index(v.Pool.Name); i >= 0 {
		p.views[i] = v
		return
	}
	p.views = append(p.views, v)
	slices.SortStableFunc(p.views, byName)
}

// Update applies change to the view of the named pool, and reports whether there
// was one. change must not rename the pool.
func (p *Pools) Update(name string, change func(*pools.View)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.index(name)
	if i < 0 {
		return false
	}
	change(&p.views[i])
	return true
}

// MarkUnhealthy records the pool's name; the view stays as it is.
func (p *Pools) MarkUnhealthy(name string, _ error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marked = append(p.marked, name)
}

// Marked returns the pools MarkUnhealthy was called for, in order.
func (p *Pools) Marked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.marked)
}

// BeginCreate lets every Create through: these pools have no breaker.
func (p *Pools) BeginCreate(string) (pools.CreateTicket, bool) { return pools.CreateTicket{}, true }

// EndCreate records the outcome.
func (p *Pools) EndCreate(_ pools.CreateTicket, o pools.CreateOutcome, _ error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outcomes = append(p.outcomes, o)
}

// Outcomes returns the outcomes EndCreate was given, in order.
func (p *Pools) Outcomes() []pools.CreateOutcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.outcomes)
}

// index is the position of the named pool's view, or -1; p.mu is held.
func (p *Pools) index(name string) int {
	return slices.IndexFunc(p.views, func(v pools.View) bool { return v.Pool.Name == name })
}

func byName(a, b pools.View) int { return strings.Compare(a.Pool.Name, b.Pool.Name) }
