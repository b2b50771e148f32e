package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// The warm section's pool, on a fake backend slower to start a sandbox than the
// zero-latency one (-warm-backend), keeping -warm-size warm.
const (
	warmPool     = "warmbench"
	warmTemplate = "bench"
	// warmPollEvery is how often the pool's warm status is read while waiting for it
	// to fill.
	warmPollEvery = 25 * time.Millisecond
)

// warmOptions shape the warm section: a pool of size on a backend taking backend
// per start takes bursts of burst creates at once, every interval.
type warmOptions struct {
	size, bursts, burst int
	backend, interval   time.Duration
}

// warmFigures are the warm section's results.
type warmFigures struct {
	Size            int `json:"size"`
	BackendCreateMs int `json:"backend_create_ms"`
	Bursts          int `json:"bursts"`
	BurstSize       int `json:"burst_size"`
	BurstIntervalMs int `json:"burst_interval_ms"`
	Creates         int `json:"creates"`
	Hits            int `json:"hits"`
	// HitRate is hits ÷ creates: the share served by a warm sandbox.
	HitRate float64 `json:"hit_rate"`
	// Create to running as the client saw it (one create call, Prefer: wait), of the
	// creates served warm and of those created cold once the pool ran dry.
	HitP50Ms  float64 `json:"hit_p50_ms"`
	HitP99Ms  float64 `json:"hit_p99_ms"`
	MissP50Ms float64 `json:"miss_p50_ms"`
	MissP99Ms float64 `json:"miss_p99_ms"`
	// FillS is how long the empty pool took to fill at the start; RefillS how long it
	// took, from the last burst's start, to have Size ready again.
	FillS   float64 `json:"fill_s"`
	RefillS float64 `json:"refill_s"`
}

// warm measures warm pools: a warm pool takes bursts of creates, paced so that it
// partly refills between them yet runs dry before the end; each create is timed
// from its burst's start until it runs, and counted a hit when it was given a warm
// sandbox. The refill is timed from the last burst until the pool has its size
// ready again.
func (b *bench) warm(ctx context.Context, d *runningDaemon, res *result) error {
	o := b.opts.warm
	w := &warmFigures{Size: o.size, BackendCreateMs: int(o.backend / time.Millisecond), Bursts: o.bursts,
		BurstSize: o.burst, BurstIntervalMs: int(o.interval / time.Millisecond)}
	res.figures.Warm = w
	tmpl := warmTemplate
	shape := client.WarmShape{Template: &tmpl, Resources: &client.Resources{CPU: 1}, Size: o.size}
	trust := client.PoolSpecTrust("private")
	cfg := map[string]any{"createLatencyMs": w.BackendCreateMs}
	began := time.Now()
	if _, err := d.client.CreatePool(ctx, client.PoolSpec{Name: warmPool, Adapter: "fake", Trust: &trust,
		Config: &cfg, Warm: &[]client.WarmShape{shape}}); err != nil {
		return fmt.Errorf("create the warm pool: %w", err)
	}
	if err := waitWarm(ctx, d.client, o.size); err != nil {
		return err
	}
	w.FillS = round(time.Since(began).Seconds())

	create := client.SandboxCreate{Template: &tmpl, Resources: &client.Resources{CPU: 1},
		Placement: &client.Placement{AllowedPools: &[]string{warmPool}}}
	var (
		mu         sync.Mutex
		hits, miss []time.Duration
		ids        []string
		firstErr   error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// refilled is the refill's time, or its error, timed from the last burst.
	refilled := make(chan error, 1)
	var last, refillDone time.Time
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
bursts:
	for i := range o.bursts {
		due := start.Add(time.Duration(i) * o.interval)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break bursts
			}
		}
		// A burst's creates that take longer than the interval overlap the next.
		for range o.burst {
			wg.Go(func() {
				sb, err := d.client.CreateSandboxAndWait(ctx, create, "")
				took := time.Since(due)
				mu.Lock()
				defer mu.Unlock()
				if err == nil && sb.State != client.Running {
					err = fmt.Errorf("sandbox %s is %s after a create that waits for running", sb.Id, sb.State)
				}
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("create: %w", err)
						cancel()
					}
					return
				}
				ids = append(ids, sb.Id)
				if sb.Labels["differently.dev/warm"] == "true" {
					hits = append(hits, took)
				} else {
					miss = append(miss, took)
				}
			})
		}
		if i == o.bursts-1 {
			last = due
			wg.Go(func() {
				// Let the last burst's creates reach the daemon before looking.
				err := waitWarmAfter(ctx, d.client, o.size, 5*warmPollEvery)
				refillDone = time.Now()
				refilled <- err
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := len(hits) + len(miss)
	if err := <-refilled; err != nil {
		return fmt.Errorf("refill: %w", err)
	}
	w.RefillS = round(refillDone.Sub(last).Seconds())

	w.Creates, w.Hits = n, len(hits)
	w.HitRate = round(float64(len(hits)) / float64(n))
	w.HitP50Ms, w.HitP99Ms = round(percentile(hits, 0.50)), round(percentile(hits, 0.99))
	w.MissP50Ms, w.MissP99Ms = round(percentile(miss, 0.50)), round(percentile(miss, 0.99))
	if len(miss) == 0 {
		res.note("warm: the pool never ran dry, so no create was served cold; the miss latency is not measured")
	}
	if len(hits) == 0 {
		res.note("warm: no create was served warm")
	}
	// The sandboxes go, then the pool with its warm sandboxes.
	err := workers(ctx, len(ids), 8, func(ctx context.Context, i int) error {
		_, err := d.client.DeleteSandboxAndWait(ctx, ids[i])
		return err
	})
	if err != nil {
		return fmt.Errorf("delete the warm section's sandboxes: %w", err)
	}
	return deleteWarmPool(ctx, d.client)
}

// deleteWarmPool deletes the warm pool, its warm sandboxes with it. The delete
// answers invalid_state while a warm sandbox is still starting (its refill after
// the last claims); it is tried again then, a bounded number of times.
func deleteWarmPool(ctx context.Context, c *client.Client) error {
	const tries = 100
	for i := range tries {
		err := c.DeletePool(ctx, warmPool, false)
		var apiErr *client.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalidState || i == tries-1 {
			if err != nil {
				return fmt.Errorf("delete the warm pool: %w", err)
			}
			return nil
		}
		select {
		case <-time.After(5 * warmPollEvery):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// waitWarm waits until the warm pool's shape has size ready.
func waitWarm(ctx context.Context, c *client.Client, size int) error {
	return waitWarmAfter(ctx, c, size, 0)
}

// waitWarmAfter is waitWarm, looking first after delay.
func waitWarmAfter(ctx context.Context, c *client.Client, size int, delay time.Duration) error {
	t := time.NewTicker(warmPollEvery)
	defer t.Stop()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		p, err := c.GetPool(ctx, warmPool)
		if err != nil {
			return fmt.Errorf("read the warm pool: %w", err)
		}
		if p.WarmStatus != nil && len(*p.WarmStatus) == 1 && (*p.WarmStatus)[0].Ready >= size {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d warm sandboxes: %w", size, ctx.Err())
		}
	}
}
