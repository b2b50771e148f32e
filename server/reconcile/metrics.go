package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/server/metrics"
)

// kindSkipped is the kind of a pool left alone for a pass (List failed, no adapter,
// pass stopped) in differently_reconcile_findings_total.
const kindSkipped = "skipped"

// findingKinds names each action in differently_reconcile_findings_total.
var findingKinds = map[ActionKind]string{
	DeleteOrphan:    "orphan_deleted",
	DeleteDuplicate: "duplicate_deleted",
	Adopt:           "adopted",
	Requeue:         "requeued",
	Lost:            "lost",
	Follow:          "state_followed",
}

// The triggers of a pass in differently_reconcile_passes_total: the leader's turn
// every interval (Run), or a pass asked of any replica (Reconcile).
const (
	triggerInterval = "interval"
	triggerRequest  = "request"
)

type recMetrics struct {
	findings *prometheus.CounterVec
	passes   *prometheus.CounterVec
	leader   prometheus.Gauge
}

func newRecMetrics(reg prometheus.Registerer) *recMetrics {
	m := &recMetrics{
		findings: metrics.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "differently_reconcile_findings_total",
			Help: "What reconcile passes on this replica did, by pool and kind: orphan_deleted, duplicate_deleted, adopted, requeued, lost, state_followed (counted once carried out), and skipped for a pool left alone for a pass.",
		}, []string{"pool", "kind"})),
		passes: metrics.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "differently_reconcile_passes_total",
			Help: "Reconcile passes this replica ran, by trigger: interval for the leader's pass every reconcile interval, request for one asked by POST /v1/admin/reconcile. Counted when the pass ends, stopped or not, once its pass lease is given up.",
		}, []string{"trigger"})),
		leader: metrics.MustRegister(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "differently_reconcile_leader",
			Help: "1 while this replica holds the reconciler lease (as of its last attempt to take or renew it), else 0.",
		})),
	}
	// Both series exist from the start, so a scrape before the first pass reads 0
	// rather than nothing.
	m.passes.WithLabelValues(triggerInterval)
	m.passes.WithLabelValues(triggerRequest)
	return m
}

func (m *recMetrics) finding(pool string, k ActionKind) {
	m.findings.WithLabelValues(pool, findingKinds[k]).Inc()
}
