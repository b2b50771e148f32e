package main

import (
	"context"
	"fmt"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// onFake places a sandbox on the zero-latency fake pool of the development daemon.
var onFake = client.SandboxCreate{Placement: &client.Placement{AllowedPools: &[]string{"fake"}}}

// lifecycle is one sandbox's whole life through the API.
type lifecycle struct {
	// toRunning is from the create call to seeing the sandbox running.
	toRunning time.Duration
	// toRunningServer is the running row's updatedAt minus its createdAt.
	toRunningServer time.Duration
	total           time.Duration
}

// summary holds the p50 and p99 of each of a set of lifecycles' durations, in
// milliseconds.
type summary struct {
	toRunning, toRunningServer, total [2]float64
}

func summarize(ls []lifecycle) summary {
	var toRun, toRunSrv, total []time.Duration
	for _, l := range ls {
		toRun = append(toRun, l.toRunning)
		toRunSrv = append(toRunSrv, l.toRunningServer)
		total = append(total, l.total)
	}
	p := func(ds []time.Duration) [2]float64 {
		return [2]float64{round(percentile(ds, 0.50)), round(percentile(ds, 0.99))}
	}
	return summary{toRunning: p(toRun), toRunningServer: p(toRunSrv), total: p(total)}
}

// runLifecycle runs one lifecycle; its latencies count from t0.
func runLifecycle(ctx context.Context, c *client.Client, t0 time.Time) (lifecycle, error) {
	var l lifecycle
	running, err := c.CreateSandboxAndWait(ctx, onFake, "")
	if err != nil {
		return l, fmt.Errorf("create sandbox and wait for running: %w", err)
	}
	sb := running
	l.toRunning = time.Since(t0)
	l.toRunningServer = running.UpdatedAt.Sub(running.CreatedAt)
	if running.Pool == nil || *running.Pool != "fake" {
		return l, fmt.Errorf("sandbox %s was placed on %v, not on the fake pool", sb.Id, running.Pool)
	}
	res, err := c.ExecSandbox(ctx, sb.Id, api.ExecRequest{Command: "true"})
	if err != nil {
		return l, fmt.Errorf("exec: %w", err)
	}
	if res.ExitCode != 0 {
		return l, fmt.Errorf("exec true on %s exited %d", sb.Id, res.ExitCode)
	}
	if _, err := c.DeleteSandboxAndWait(ctx, sb.Id); err != nil {
		return l, fmt.Errorf("delete sandbox and wait for terminated: %w", err)
	}
	l.total = time.Since(t0)
	return l, nil
}

// lifecycles runs -n lifecycles at concurrency -c through the API.
func (b *bench) lifecycles(ctx context.Context, d *runningDaemon, res *result) error {
	// One lifecycle first, unmeasured: the first request pays for connections and the
	// first pool probe.
	if _, err := runLifecycle(ctx, d.client, time.Now()); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	n := b.opts.n
	ls := make([]lifecycle, n)
	req0, pass0, direct0, rq0 := d.requests.Load(), d.passes.Load(), d.direct.Load(), d.requeued.Load()
	cpu0 := b.cpu.sample(ctx)
	start := time.Now()
	err := workers(ctx, n, b.opts.c, func(ctx context.Context, i int) error {
		l, err := runLifecycle(ctx, d.client, time.Now())
		ls[i] = l
		return err
	})
	wall := time.Since(start)
	if err != nil {
		return err
	}
	self, server, why := b.cpu.since(ctx, cpu0)
	f := &res.figures
	f.CPUPerLifecycleProcessMs = round(ms(self) / float64(n))
	f.CPUPerLifecyclePostgresMs = round(ms(server) / float64(n))
	if why != "" && b.opts.store == "postgres" {
		res.note("PostgreSQL's CPU per lifecycle is not measured: %s", why)
	}
	f.Store = b.opts.store
	l := summarize(ls)
	f.CreateToRunningP50Ms, f.CreateToRunningP99Ms = l.toRunning[0], l.toRunning[1]
	f.CreateToRunningServerP50Ms, f.CreateToRunningServerP99Ms = l.toRunningServer[0], l.toRunningServer[1]
	f.LifecycleP50Ms, f.LifecycleP99Ms = l.total[0], l.total[1]
	f.LifecyclesPerS = round(float64(n) / wall.Seconds())
	f.LifecyclesS = round(wall.Seconds())
	f.HTTPRequestsPerLifecycle = round(float64(d.requests.Load()-req0) / float64(n))
	f.SchedulerPassesPerS = round(float64(d.passes.Load()-pass0) / wall.Seconds())
	f.DirectPerLifecycle = round(float64(d.direct.Load()-direct0) / float64(n))
	f.SchedulerRequeues = int(d.requeued.Load() - rq0)
	if f.SchedulerRequeues > 0 {
		res.note("the scheduler handed sandboxes back to the queue %d times during the lifecycles; on the zero-latency fake pool the cause is its maxStarting limit (default 8 Creates in flight per replica), and such a sandbox is due again at once", f.SchedulerRequeues)
	}
	if f.CreateToRunningP50Ms > 5*max(f.CreateToRunningServerP50Ms, 1) {
		res.note("create→running seen by the client is far above the daemon's own (%v ms at p50): the time is spent between the daemon and the client (HTTP, the wait for the answer)", f.CreateToRunningServerP50Ms)
	}
	return nil
}
