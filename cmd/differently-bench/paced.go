package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// pacedRate is one -rate: lifecycles per second, or with percent a percentage of the
// closed loop's lifecycles per second.
type pacedRate struct {
	value   float64
	percent bool
}

// pacedFigures are one arrival rate's results of the paced section.
type pacedFigures struct {
	// RatePerS is the offered arrival rate, AchievedPerS the lifecycles completed per
	// second of the section's wall time.
	RatePerS float64 `json:"rate_per_s"`
	// PercentOfMax, when not 0, is the rate as asked for: a percentage of the closed
	// loop's lifecycles per second.
	PercentOfMax float64 `json:"percent_of_max,omitempty"`
	AchievedPerS float64 `json:"achieved_per_s"`
	N            int     `json:"n"`
	// Create to running counts from each lifecycle's scheduled arrival, not from when
	// the benchmark got round to sending it, so a daemon that falls behind pays for
	// its backlog (no coordinated omission).
	CreateToRunningP50Ms float64 `json:"create_to_running_p50_ms"`
	CreateToRunningP99Ms float64 `json:"create_to_running_p99_ms"`
	// ...and from the daemon's own timestamps, as in the closed loop.
	CreateToRunningServerP50Ms float64 `json:"create_to_running_server_p50_ms"`
	CreateToRunningServerP99Ms float64 `json:"create_to_running_server_p99_ms"`
	LifecycleP50Ms             float64 `json:"lifecycle_p50_ms"`
	LifecycleP99Ms             float64 `json:"lifecycle_p99_ms"`
	// MaxInFlight is the most lifecycles running at once; WaitedForSlot counts the
	// arrivals that found -c lifecycles in flight and were sent only when one ended.
	MaxInFlight   int `json:"max_in_flight"`
	WaitedForSlot int `json:"waited_for_slot"`
	// HostWorkMs is the fixed work's time just before this rate (hostWorkMs).
	HostWorkMs float64 `json:"host_work_ms"`
}

// paced runs -paced-n lifecycles at each -rate, arrivals spaced evenly in time and
// at most -c in flight. The closed loop measures the daemon at saturation, where
// every request waits behind the others for the CPUs; this section measures what a
// create costs a caller when the daemon is loaded but keeps up.
func (b *bench) paced(ctx context.Context, d *runningDaemon, res *result) error {
	if _, err := runLifecycle(ctx, d.client, time.Now()); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for _, r := range b.opts.rates {
		rate := r.value
		if r.percent {
			rate = round(res.figures.LifecyclesPerS * r.value / 100)
			if rate <= 0 {
				return fmt.Errorf("-rate %g%%: the closed loop measured no throughput", r.value)
			}
		}
		b.progress("paced: %d lifecycles arriving at %g/s, at most %d in flight", b.opts.pacedN, rate, b.opts.c)
		work := res.figures.sampleHost(fmt.Sprintf("paced %g/s", rate))
		p, err := pacedRun(ctx, d, rate, b.opts.pacedN, b.opts.c)
		if err != nil {
			return fmt.Errorf("at %g/s: %w", rate, err)
		}
		p.HostWorkMs = work
		if r.percent {
			p.PercentOfMax = r.value
		}
		res.figures.Paced = append(res.figures.Paced, p)
		if p.WaitedForSlot > 0 {
			res.note("paced at %g/s: %d of %d arrivals found %d lifecycles in flight and waited for one to end: the daemon did not keep up with that rate, and their latency includes the wait", rate, p.WaitedForSlot, p.N, b.opts.c)
		}
	}
	return nil
}

// pacedRun sends n lifecycles, the i-th due at start + i/rate, holding at most
// limit in flight; a lifecycle's latencies count from when it was due.
func pacedRun(ctx context.Context, d *runningDaemon, rate float64, n, limit int) (pacedFigures, error) {
	p := pacedFigures{RatePerS: rate, N: n}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ls := make([]lifecycle, n)
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
dispatch:
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break dispatch
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			p.WaitedForSlot++
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				break dispatch
			}
		}
		// The slots held are the lifecycles in flight, this one included.
		p.MaxInFlight = max(p.MaxInFlight, len(slots))
		wg.Go(func() {
			defer func() { <-slots }()
			l, err := runLifecycle(ctx, d.client, due)
			if err != nil {
				cancel(err) // the first cause is kept
				return
			}
			ls[i] = l
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return p, err
	}
	p.AchievedPerS = round(float64(n) / wall.Seconds())
	l := summarize(ls)
	p.CreateToRunningP50Ms, p.CreateToRunningP99Ms = l.toRunning[0], l.toRunning[1]
	p.CreateToRunningServerP50Ms, p.CreateToRunningServerP99Ms = l.toRunningServer[0], l.toRunningServer[1]
	p.LifecycleP50Ms, p.LifecycleP99Ms = l.total[0], l.total[1]
	return p, nil
}
