package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/server/metrics"
	"github.com/different-ai/differently/server/store"
)

// Values of the code label of differently_create_attempts_total besides api codes.
const (
	codeOK = "ok"
	// codeInterrupted: a Create cut short by this replica's shutdown, not answered
	// by the backend.
	codeInterrupted = "interrupted"
)

// Values of the result label of differently_terminations_total.
const (
	termDeleted            = "deleted"             // Delete succeeded (or the instance was already gone)
	termNoInstance         = "no_instance"         // nothing to delete: the sandbox never got an instance
	termAdapterUnavailable = "adapter_unavailable" // terminated without deleting: the pool has no adapter
	termDeleteFailed       = "delete_failed"       // one failed Delete; the sandbox stays terminating
	termGaveUp             = "gave_up"             // Delete kept failing past TerminateGiveUp; the sandbox failed
)

// depthStates are the states differently_sandboxes reports: those a sandbox passes
// through. Terminal states only grow and are left to the database.
var depthStates = store.NonTerminalStates

type schedMetrics struct {
	sandboxes    *prometheus.GaugeVec
	provision    *prometheus.HistogramVec
	attempts     *prometheus.CounterVec
	terminations *prometheus.CounterVec
	direct       *prometheus.CounterVec
	stages       *prometheus.HistogramVec
}

// Values of the stage label of differently_stage_seconds, in the order a sandbox
// passes them.
const (
	// stageQueue: from entering the queue to being claimed by a pass (0 for a create
	// the API started at once).
	stageQueue = "queue_wait"
	// stagePlace: from the claim to the placement written (provisioning on the pool).
	stagePlace = "placement"
	// stageCreate: the backend's Create call, whatever it answered.
	stageCreate = "backend_create"
	// stageReady: from the backend's answer to the sandbox recorded running, ready
	// for use.
	stageReady = "running_to_ready"
)

func newSchedMetrics(reg prometheus.Registerer) (*schedMetrics, error) {
	m := &schedMetrics{
		sandboxes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "differently_sandboxes",
			Help: "Sandboxes in each non-terminal state, database-wide (every replica reports the same count: aggregate with max, not sum), as of this replica's last housekeeping pass.",
		}, []string{"state"}),
		provision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "differently_provision_seconds",
			Help:    "Time from claiming a sandbox (a pass's claim, or the API's direct start) to recording it running, by pool, for sandboxes this replica provisioned.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 12), // 0.25 s to 512 s
		}, []string{"pool"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "differently_create_attempts_total",
			Help: "Create calls made by this replica, by pool and outcome: ok, the error code the adapter answered, or interrupted (this replica shut down).",
		}, []string{"pool", "code"}),
		terminations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "differently_terminations_total",
			Help: "Termination outcomes on this replica: deleted, no_instance, adapter_unavailable, gave_up (the sandbox failed), and delete_failed for each Delete that failed and will be retried.",
		}, []string{"result"}),
		direct: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "differently_direct_work_total",
			Help: "Creates and Deletes the API handed straight to this replica's scheduler (work: create or delete), skipping the queue and the passes.",
		}, []string{"work"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "differently_stage_seconds",
			Help: "Time a sandbox spent in each stage of its provisioning on this replica, by stage (queue_wait, placement, backend_create, running_to_ready) and pool.",
			// 1 ms to about 9 minutes: the control plane's own stages take
			// milliseconds, a backend's Create seconds to minutes.
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 15),
		}, []string{"stage", "pool"}),
	}
	var err error
	if m.sandboxes, err = metrics.Register(reg, m.sandboxes); err != nil {
		return nil, err
	}
	if m.provision, err = metrics.Register(reg, m.provision); err != nil {
		return nil, err
	}
	if m.attempts, err = metrics.Register(reg, m.attempts); err != nil {
		return nil, err
	}
	if m.terminations, err = metrics.Register(reg, m.terminations); err != nil {
		return nil, err
	}
	if m.direct, err = metrics.Register(reg, m.direct); err != nil {
		return nil, err
	}
	if m.stages, err = metrics.Register(reg, m.stages); err != nil {
		return nil, err
	}
	return m, nil
}

// setDepth publishes the counts of the given states; a state absent from counts has
// no sandbox.
func (m *schedMetrics) setDepth(states []store.State, counts map[store.State]int) {
	for _, st := range states {
		m.sandboxes.WithLabelValues(string(st)).Set(float64(counts[st]))
	}
}
