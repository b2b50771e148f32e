package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/internal/ids"
)

const benchInstallation = "inst_bench"

// apiSandbox creates a sandbox through the API on pool and waits until it runs.
func apiSandbox(ctx context.Context, c *client.Client, pool string) (string, func(), error) {
	sb, err := c.CreateSandbox(ctx, client.SandboxCreate{Placement: &client.Placement{AllowedPools: &[]string{pool}}}, "")
	if err != nil {
		return "", nil, fmt.Errorf("create sandbox on %s: %w", pool, err)
	}
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteSandbox(cctx, sb.Id)
	}
	if _, err := c.WaitForState(ctx, sb.Id, client.Running); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("wait for the %s sandbox: %w", pool, err)
	}
	return sb.Id, cleanup, nil
}

// execOverhead times exec `true` one at a time through the API and directly on a
// fake adapter of its own, which is the code the daemon calls for the fake pool.
func (b *bench) execOverhead(ctx context.Context, d *runningDaemon, res *result) error {
	id, cleanup, err := apiSandbox(ctx, d.client, "fake")
	if err != nil {
		return err
	}
	defer cleanup()
	req := api.ExecRequest{Command: "true"}

	fa := fake.New(fake.Config{})
	inst, err := fa.Create(ctx, adapters.CreateRequest{ID: ids.New("sbx"), Installation: benchInstallation})
	if err != nil {
		return err
	}
	n := b.opts.execN
	warm := min(n, 20)
	timed := func(f func() error) ([]time.Duration, error) {
		var out []time.Duration
		for i := range n + warm {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if err := f(); err != nil {
				return nil, err
			}
			if i >= warm {
				out = append(out, time.Since(t0))
			}
		}
		return out, nil
	}
	viaAPI, err := timed(func() error {
		r, err := d.client.ExecSandbox(ctx, id, req)
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("exec true exited %d", r.ExitCode)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("exec through the API: %w", err)
	}
	direct, err := timed(func() error {
		_, err := fa.Exec(ctx, inst.Ref, req)
		return err
	})
	if err != nil {
		return fmt.Errorf("exec on the adapter: %w", err)
	}
	f := &res.figures
	f.ExecAPIP50Ms = round(percentile(viaAPI, 0.5))
	f.ExecAPIP99Ms = round(percentile(viaAPI, 0.99))
	f.ExecDirectP50Ms = round(percentile(direct, 0.5))
	f.ExecOverheadP50Ms = round(percentile(viaAPI, 0.5) - percentile(direct, 0.5))
	return nil
}

// stream compares a streamed exec producing -stream-bytes through the API (the
// daemon's devhost pool) with the same ExecStream on a devhost adapter of its own.
func (b *bench) stream(ctx context.Context, d *runningDaemon, directRoot string, res *result) error {
	id, cleanup, err := apiSandbox(ctx, d.client, "devhost")
	if err != nil {
		return err
	}
	defer cleanup()
	da, err := devhost.New(directRoot)
	if err != nil {
		return err
	}
	inst, err := da.Create(ctx, adapters.CreateRequest{ID: ids.New("sbx"), Installation: benchInstallation})
	if err != nil {
		return err
	}
	defer da.Delete(context.WithoutCancel(ctx), inst.Ref)

	want := b.opts.streamBytes
	viaAPI := func(req api.ExecRequest) (time.Duration, error) {
		t0 := time.Now()
		var got int64
		exit := -1
		for ev, err := range d.client.ExecSandboxStream(ctx, id, req) {
			if err != nil {
				return 0, fmt.Errorf("stream through the API: %w", err)
			}
			got += int64(len(ev.Data))
			if ev.ExitCode != nil {
				exit = *ev.ExitCode
			}
		}
		el := time.Since(t0)
		if got != want || exit != 0 {
			return 0, fmt.Errorf("stream through the API: %d bytes and exit %d, want %d bytes and exit 0", got, exit, want)
		}
		return el, nil
	}
	direct := func(req api.ExecRequest) (time.Duration, error) {
		t0 := time.Now()
		var got int64
		st, err := da.ExecStream(ctx, inst.Ref, req, func(ev api.ExecEvent) error {
			got += int64(len(ev.Data))
			return nil
		})
		el := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("stream on the adapter: %w", err)
		}
		if got != want || st.Code != 0 {
			return 0, fmt.Errorf("stream on the adapter: %d bytes and exit %d, want %d bytes and exit 0", got, st.Code, want)
		}
		return el, nil
	}
	// An odd number, so that each median is one trial's.
	const streamTrials = 5
	mibps := func(d time.Duration) float64 { return float64(want) / (1 << 20) / d.Seconds() }

	// Printable output, read from a file made beforehand in each sandbox: the
	// producer (cat from the page cache) is then as fast as the host's pipes allow.
	// Three runs each, alternating; the median counts.
	const file = "bench-stream.dat"
	mk := api.ExecRequest{Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x > %s", want, file)}
	if r, err := d.client.ExecSandbox(ctx, id, mk); err != nil || r.ExitCode != 0 {
		return fmt.Errorf("write the stream's file through the API: %v %v", r, err)
	}
	if r, err := da.Exec(ctx, inst.Ref, mk); err != nil || r.ExitCode != 0 {
		return fmt.Errorf("write the stream's file on the adapter: %v %v", r, err)
	}
	// trials streams req streamTrials times each way, alternating, and returns the
	// median durations and the median of each pair's ratio (direct ÷ API): single
	// streams on shared CPUs move by a fifth or more, and a pair's two runs share
	// whatever else the machine was doing then, so its ratio moves much less.
	trials := func(req api.ExecRequest) (viaAPIMedian, directMedian time.Duration, ratio float64, err error) {
		var apiRuns, directRuns []time.Duration
		var ratios []float64
		for range streamTrials {
			a, err := viaAPI(req)
			if err != nil {
				return 0, 0, 0, err
			}
			dr, err := direct(req)
			if err != nil {
				return 0, 0, 0, err
			}
			apiRuns, directRuns = append(apiRuns, a), append(directRuns, dr)
			ratios = append(ratios, dr.Seconds()/a.Seconds())
		}
		slices.Sort(apiRuns)
		slices.Sort(directRuns)
		slices.Sort(ratios)
		m := streamTrials / 2
		return apiRuns[m], directRuns[m], ratios[m], nil
	}
	a, dr, ratio, err := trials(api.ExecRequest{Command: "cat " + file})
	if err != nil {
		return err
	}
	f := &res.figures
	f.StreamBytes = want
	f.StreamTrials = streamTrials
	f.StreamAPIMiBps = round(mibps(a))
	f.StreamDirectMiBps = round(mibps(dr))
	f.StreamRatio = round(ratio)

	// Raw NUL bytes, from a producer that writes 4 KiB at a time: a client that
	// asked for NDJSON would get each as six bytes of JSON, the framed stream the Go
	// client asks for carries them as they are.
	a, dr, ratio, err = trials(api.ExecRequest{Command: fmt.Sprintf("head -c %d /dev/zero", want)})
	if err != nil {
		return err
	}
	f.StreamAPINULMiBps = round(mibps(a))
	f.StreamDirectNULMBs = round(mibps(dr))
	f.StreamRatioNUL = round(ratio)
	return nil
}
