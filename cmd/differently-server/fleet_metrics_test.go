package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// This file reads what the fleet's reconcilers did through the daemons' public
// interfaces: each replica's Prometheus metrics (its passes and the instances it
// deleted, which no event records) and the sandbox events they wrote (docs/pools.md,
// "Watching the reconciler").

// reconcileFigures is what one daemon's /metrics says of its reconciler.
type reconcileFigures struct {
	// passes counts the passes the daemon ran, by trigger: interval (the leader's
	// turn) or request (POST /v1/admin/reconcile).
	passes map[string]int
	// findings counts what its passes did, by pool and kind.
	findings map[finding]int
	// leader is whether the daemon held the reconciler lease at its last attempt.
	leader bool
}

// finding is one series of differently_reconcile_findings_total.
type finding struct{ pool, kind string }

// metricsTimeout bounds one read of a daemon's /metrics.
const metricsTimeout = 30 * time.Second

// readMetrics reads the reconciler's figures from the /metrics of each of ps, or of
// every live daemon when ps is empty, and keeps them on the daemon. A daemon that
// cannot be read keeps its last figures. Only the test's goroutine may call it.
func (f *fleet) readMetrics(ps ...*daemonProc) error {
	if len(ps) == 0 {
		ps = f.live()
	}
	var errs []error
	for _, p := range ps {
		fig, err := scrapeReconciler(f.t.Context(), p.url)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s's metrics: %w", p.name, err))
			continue
		}
		f.mu.Lock()
		p.reconciler = fig
		f.mu.Unlock()
	}
	return errors.Join(errs...)
}

// scrapeReconciler reads the reconciler's series from the /metrics of the daemon at
// base.
func scrapeReconciler(ctx context.Context, base string) (reconcileFigures, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return reconcileFigures{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reconcileFigures{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return reconcileFigures{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return reconcileFigures{}, fmt.Errorf("GET /metrics: %w", err)
	}
	fig := reconcileFigures{passes: map[string]int{}, findings: map[finding]int{}}
	for _, m := range families["differently_reconcile_passes_total"].GetMetric() {
		fig.passes[label(m, "trigger")] = int(m.GetCounter().GetValue())
	}
	for _, m := range families["differently_reconcile_findings_total"].GetMetric() {
		fig.findings[finding{label(m, "pool"), label(m, "kind")}] = int(m.GetCounter().GetValue())
	}
	for _, m := range families["differently_reconcile_leader"].GetMetric() {
		fig.leader = m.GetGauge().GetValue() == 1
	}
	if _, ok := fig.passes["interval"]; !ok {
		return reconcileFigures{}, errors.New("GET /metrics: no differently_reconcile_passes_total{trigger=\"interval\"}")
	}
	return fig, nil
}

// label is the value of m's label name.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// passes reads every live daemon's metrics and counts the reconcile passes every
// daemon ran so far, the killed ones' up to their last reading.
func (f *fleet) passes() (int, error) {
	err := f.readMetrics()
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.procs {
		for _, c := range p.reconciler.passes {
			n += c
		}
	}
	return n, err
}

// reconcilerEvents lists, through a live daemon, every event a reconciler recorded:
// each is one change it made to a sandbox.
func (f *fleet) reconcilerEvents() []event {
	f.t.Helper()
	var out []event
	cursor := ""
	for {
		var page struct {
			Items      []event `json:"items"`
			NextCursor string  `json:"nextCursor"`
		}
		f.call(f.live()[0], "GET", "/v1/events?limit=1000&cursor="+url.QueryEscape(cursor), "", http.StatusOK, &page)
		for _, e := range page.Items {
			if strings.HasPrefix(e.Actor, "reconciler:") {
				out = append(out, e)
			}
		}
		if len(page.Items) == 0 {
			return out
		}
		cursor = page.NextCursor
	}
}
