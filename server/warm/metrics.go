package warm

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/server/metrics"
	"github.com/different-ai/differently/server/store"
)

type warmMetrics struct {
	sandboxes    *prometheus.GaugeVec
	target       *prometheus.GaugeVec
	claims       *prometheus.CounterVec
	claimSeconds *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*warmMetrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	return &warmMetrics{
		sandboxes: metrics.MustRegister(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "differently_warm_sandboxes",
			Help: "Warm sandboxes per pool and shape (the shape's key, as in its project's name), by state: ready (running, waiting for a create) or starting, as this replica's last warm-pool pass found them.",
		}, []string{"pool", "shape", "state"})),
		target: metrics.MustRegister(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "differently_warm_target",
			Help: "The size of each pool's warm shape.",
		}, []string{"pool", "shape"})),
		claims: metrics.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "differently_warm_claims_total",
			Help: "Creates on this replica that a pool's warm shape matched, per pool and shape (its key), by outcome: hit (given a warm sandbox) or miss (none was ready, so created cold; counted against the first pool and shape that matched).",
		}, []string{"pool", "shape", "outcome"})),
		claimSeconds: metrics.MustRegister(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "differently_warm_claim_seconds",
			Help:    "How long taking a warm sandbox took, in the store, per pool and shape.",
			Buckets: store.WarmClaimBuckets,
		}, []string{"pool", "shape"})),
	}, nil
}

// report sets the gauges from a pass's findings, dropping the series of shapes
// that are gone.
func (f *Filler) report(shapes map[string]*shape) {
	f.m.sandboxes.Reset()
	f.m.target.Reset()
	for _, sh := range shapes {
		key := sh.w.Key()
		f.m.sandboxes.WithLabelValues(sh.pool, key, "ready").Set(float64(len(sh.ready)))
		f.m.sandboxes.WithLabelValues(sh.pool, key, "starting").Set(float64(sh.starting))
		f.m.target.WithLabelValues(sh.pool, key).Set(float64(sh.w.Size))
	}
}
