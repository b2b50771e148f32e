// Package retention bounds the sandbox event history: every interval it deletes the
// events the configured retention no longer keeps (store.EventRetention), so the
// table never grows without limit however long the daemon runs.
//
// Every replica prunes on its own. The deletes are idempotent and bounded in size,
// so two replicas pruning at once only repeat a cheap query; no lease is needed.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/metrics"
	"github.com/different-ai/differently/server/store"
)

// DefaultInterval is how often a pruner runs. What it keeps is the config's
// (events.keepPerSandbox and events.keepAfterTerminalSeconds, whose defaults are in
// server/defaults).
const DefaultInterval = 5 * time.Minute

// Store is what pruning needs of the store.
type Store interface {
	PruneEvents(ctx context.Context, now time.Time, r store.EventRetention) (int, error)
}

// Pruner deletes events past their retention.
type Pruner struct {
	st       Store
	clk      clock.Clock
	keep     store.EventRetention
	interval time.Duration
	log      *slog.Logger
	pruned   prometheus.Counter
}

// New builds a pruner that keeps what keep says, every interval (DefaultInterval
// when 0). reg receives differently_events_pruned_total (the one already there when
// another pruner registered it); nil records it nowhere.
func New(st Store, clk clock.Clock, keep store.EventRetention, interval time.Duration, log *slog.Logger, reg prometheus.Registerer) (*Pruner, error) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pruned := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "differently_events_pruned_total",
		Help: "Sandbox events deleted because their retention ended.",
	})
	pruned, err := metrics.Register(reg, pruned)
	if err != nil {
		return nil, err
	}
	return &Pruner{st: st, clk: clk, keep: keep, interval: interval, log: log, pruned: pruned}, nil
}

// Once prunes now and returns how many events it deleted.
func (p *Pruner) Once(ctx context.Context) (int, error) {
	if p.keep.PerSandbox <= 0 && p.keep.AfterTerminal <= 0 {
		return 0, nil
	}
	n, err := p.st.PruneEvents(ctx, p.clk.Now(), p.keep)
	p.pruned.Add(float64(n))
	return n, err
}

// Run prunes every interval until ctx ends.
func (p *Pruner) Run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		n, err := p.Once(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Warn("prune events", "error", err)
		case n > 0:
			p.log.Debug("pruned events", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
