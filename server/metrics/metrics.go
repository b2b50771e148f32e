// Package metrics holds what the daemon's Prometheus collectors share: registering
// them on the one registry the daemon passes to every part, and reading a value back,
// which tests use to assert on what a pass recorded.
//
// The metrics themselves live with the code that records them (package scheduler,
// reconcile, pools and httpapi); each takes a prometheus.Registerer option, and nil
// means "record nothing anyone can scrape".
package metrics

import (
	"errors"
	"fmt"
	"maps"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Register registers c on reg and returns the collector to record on: c itself, or
// the equal collector already registered (two components of one process built on
// the same registry, as tests do, then share it). A nil reg leaves c unregistered,
// so callers record on it unconditionally. Any other registration failure (a name
// reused with other labels) is a programming error and is returned.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("metrics: register: %w", err)
}

// MustRegister is Register for constructors that cannot fail: it panics on a
// programming error.
func MustRegister[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	out, err := Register(reg, c)
	if err != nil {
		panic(err)
	}
	return out
}

// Sample is one gathered series.
type Sample struct {
	// Value is a counter's or gauge's value, or a histogram's sample count.
	Value float64
	// Sum is a histogram's sum of observations; 0 for other kinds.
	Sum float64
}

// Get gathers g and returns the series of the metric name whose labels are exactly
// labels, and whether it exists.
func Get(g prometheus.Gatherer, name string, labels map[string]string) (Sample, bool, error) {
	families, err := g.Gather()
	if err != nil {
		return Sample{}, false, err
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !maps.Equal(labelMap(m), labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return Sample{Value: m.GetCounter().GetValue()}, true, nil
			case m.GetGauge() != nil:
				return Sample{Value: m.GetGauge().GetValue()}, true, nil
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				return Sample{Value: float64(h.GetSampleCount()), Sum: h.GetSampleSum()}, true, nil
			case m.GetUntyped() != nil:
				return Sample{Value: m.GetUntyped().GetValue()}, true, nil
			}
		}
	}
	return Sample{}, false, nil
}

func labelMap(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
