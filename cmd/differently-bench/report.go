package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// figures is the last line of the output. The first nine keys are the ones issue 7
// names; the rest explain them.
type figures struct {
	CreateToRunningP50Ms float64 `json:"create_to_running_p50_ms"`
	CreateToRunningP99Ms float64 `json:"create_to_running_p99_ms"`
	LifecyclesPerS       float64 `json:"lifecycles_per_s"`
	ExecOverheadP50Ms    float64 `json:"exec_overhead_p50_ms"`
	StreamRatio          float64 `json:"stream_ratio"`
	StoreFloorRatio      float64 `json:"store_floor_ratio"`
	Reconcile100kMs      float64 `json:"reconcile_100k_ms"`
	Reconcile100kMiB     float64 `json:"reconcile_100k_mib"`
	PeakRSSMiB           float64 `json:"peak_rss_mib"`

	Store string `json:"store"`
	N     int    `json:"n"`
	C     int    `json:"c"`
	// Create to running as the daemon saw it: the running row's updatedAt minus its
	// createdAt, free of the client's waiting.
	CreateToRunningServerP50Ms float64 `json:"create_to_running_server_p50_ms"`
	CreateToRunningServerP99Ms float64 `json:"create_to_running_server_p99_ms"`
	LifecycleP50Ms             float64 `json:"lifecycle_p50_ms"`
	LifecycleP99Ms             float64 `json:"lifecycle_p99_ms"`
	HTTPRequestsPerLifecycle   float64 `json:"http_requests_per_lifecycle"`
	SchedulerPassesPerS        float64 `json:"scheduler_passes_per_s"`
	DirectPerLifecycle         float64 `json:"direct_per_lifecycle"`
	SchedulerRequeues          int     `json:"scheduler_requeues"`
	LifecyclesS                float64 `json:"lifecycles_s"`
	// CPU time per lifecycle of the closed loop: of this process (the daemon and its
	// HTTP clients, which share it; on SQLite the store too) and of the PostgreSQL
	// server processes serving the daemon.
	CPUPerLifecycleProcessMs  float64 `json:"cpu_per_lifecycle_process_ms"`
	CPUPerLifecyclePostgresMs float64 `json:"cpu_per_lifecycle_postgres_ms"`

	// Paced holds the paced section's results, one per arrival rate.
	Paced []pacedFigures `json:"paced"`
	// Warm holds the warm section's results; nil when it did not run.
	Warm *warmFigures `json:"warm,omitempty"`

	ExecAPIP50Ms    float64 `json:"exec_api_p50_ms"`
	ExecAPIP99Ms    float64 `json:"exec_api_p99_ms"`
	ExecDirectP50Ms float64 `json:"exec_direct_p50_ms"`

	StreamBytes        int64   `json:"stream_bytes"`
	StreamAPIMiBps     float64 `json:"stream_api_mib_per_s"`
	StreamDirectMiBps  float64 `json:"stream_direct_mib_per_s"`
	StreamRatioNUL     float64 `json:"stream_ratio_nul_bytes"`
	StreamAPINULMiBps  float64 `json:"stream_api_nul_mib_per_s"`
	StreamDirectNULMBs float64 `json:"stream_direct_nul_mib_per_s"`

	FloorLifecyclesPerS float64 `json:"floor_lifecycles_per_s"`
	FloorTxPerS         float64 `json:"floor_transactions_per_s"`

	ReconcileN            int     `json:"reconcile_n"`
	ReconcileFullN        int     `json:"reconcile_full_n"`
	ReconcileFullMs       float64 `json:"reconcile_full_ms"`
	ReconcileFullMiB      float64 `json:"reconcile_full_mib"`
	ReconcileFullAllocMiB float64 `json:"reconcile_full_alloc_mib"`
	ReconcileAgainMs      float64 `json:"reconcile_second_pass_ms"`
	ReconcileAgainMiB     float64 `json:"reconcile_second_pass_mib"`
	ReconcileExtrapolated int     `json:"reconcile_extrapolated"`
	ReconcileSetupS       float64 `json:"reconcile_setup_s"`
	ReconcileSetupPerS    float64 `json:"reconcile_setup_rows_per_s"`
	ReconcilePlanMs       float64 `json:"reconcile_plan_only_ms"`
	ReconcilePlanMiB      float64 `json:"reconcile_plan_only_mib"`

	PeakRSSTotalMiB float64 `json:"peak_rss_total_mib"`
	// LoadAvgStart and LoadAvgEnd are the host's one-minute load averages: figures
	// taken on a busy machine are not the daemon's alone.
	LoadAvgStart float64 `json:"load_avg_1m_start"`
	LoadAvgEnd   float64 `json:"load_avg_1m_end"`
	NumCPU       int     `json:"num_cpu"`
	// HostWork is the time a fixed amount of CPU work took at the start, before
	// each paced rate and at the end (hostWorkMs).
	HostWork []hostSample `json:"host_work_ms"`
	TotalS   float64      `json:"total_s"`

	// Stores holds, by store, the lifecycle, paced and warm figures of the other stores
	// --store listed, run after this one's sections for comparison.
	Stores map[string]*figures `json:"stores,omitempty"`
	// StreamTrials is how many alternating pairs of streams the stream figures are
	// the medians of.
	StreamTrials int `json:"stream_trials,omitempty"`
}

// result is a run's figures and the notes that go with the table.
type result struct {
	figures figures
	notes   []string
}

func (r *result) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// round keeps four decimals, enough for milliseconds and ratios.
func round(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return 0
	}
	return math.Round(x*10000) / 10000
}

func printTable(w io.Writer, o options, r *result) {
	f := r.figures
	fmt.Fprintf(w, "differently-bench: store %s, %d lifecycles at concurrency %d, reconcile over %d\n\n", f.Store, f.N, f.C, f.ReconcileN)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, v any, unit, note string) {
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", name, v, unit, note)
	}
	fmt.Fprintln(tw, "figure\tvalue\tunit\tnote")
	fmt.Fprintln(tw, "------\t-----\t----\t----")
	row("create→running p50", f.CreateToRunningP50Ms, "ms", "client-observed: CreateSandboxAndWait (Prefer: wait) until it runs")
	row("create→running p99", f.CreateToRunningP99Ms, "ms", "")
	row("create→running p50 (daemon)", f.CreateToRunningServerP50Ms, "ms", "running row updatedAt − createdAt")
	row("create→running p99 (daemon)", f.CreateToRunningServerP99Ms, "ms", "")
	row("lifecycles/s", f.LifecyclesPerS, "1/s", fmt.Sprintf("create until running, exec true, delete until terminated; %.1f s", f.LifecyclesS))
	row("lifecycle p50 / p99", fmt.Sprintf("%v / %v", f.LifecycleP50Ms, f.LifecycleP99Ms), "ms", "")
	row("CPU per lifecycle: daemon + clients", f.CPUPerLifecycleProcessMs, "ms", "this process's user + system time over the closed loop; the store too on SQLite")
	row("CPU per lifecycle: PostgreSQL", f.CPUPerLifecyclePostgresMs, "ms", "the server processes of the daemon's connections, from /proc")
	row("HTTP requests per lifecycle", f.HTTPRequestsPerLifecycle, "", "waits included")
	row("scheduler passes/s", f.SchedulerPassesPerS, "1/s", "during the lifecycles")
	row("direct work per lifecycle", f.DirectPerLifecycle, "", "Creates and Deletes the API handed to the scheduler (2 when none was queued)")
	row("scheduler requeues", f.SchedulerRequeues, "", "during the lifecycles; hand-backs for want of a start slot")
	row("peak RSS after lifecycles", f.PeakRSSMiB, "MiB", "VmHWM: daemon + client + store driver")
	for _, p := range f.Paced {
		rate := fmt.Sprintf("%g/s", p.RatePerS)
		if p.PercentOfMax != 0 {
			rate = fmt.Sprintf("%g/s (%g%% of max)", p.RatePerS, p.PercentOfMax)
		}
		row(fmt.Sprintf("paced %s: create→running p50 / p99", rate), fmt.Sprintf("%v / %v", p.CreateToRunningP50Ms, p.CreateToRunningP99Ms), "ms",
			fmt.Sprintf("%d lifecycles due at even intervals, timed from when each was due; daemon %v / %v ms; fixed CPU work before: %v ms", p.N, p.CreateToRunningServerP50Ms, p.CreateToRunningServerP99Ms, p.HostWorkMs))
		row(fmt.Sprintf("paced %s: lifecycle p50 / p99", rate), fmt.Sprintf("%v / %v", p.LifecycleP50Ms, p.LifecycleP99Ms), "ms",
			fmt.Sprintf("%v/s achieved, at most %d in flight, %d waited for a slot", p.AchievedPerS, p.MaxInFlight, p.WaitedForSlot))
	}
	if w := f.Warm; w != nil {
		shape := fmt.Sprintf("pool of %d warm on a %d ms backend, %d bursts of %d every %d ms", w.Size, w.BackendCreateMs, w.Bursts, w.BurstSize, w.BurstIntervalMs)
		row("warm hit: create→running p50 / p99", fmt.Sprintf("%v / %v", w.HitP50Ms, w.HitP99Ms), "ms", fmt.Sprintf("%d creates served warm; %s", w.Hits, shape))
		row("warm hit rate", w.HitRate, "", fmt.Sprintf("%d of %d creates", w.Hits, w.Creates))
		row("warm miss: create→running p50 / p99", fmt.Sprintf("%v / %v", w.MissP50Ms, w.MissP99Ms), "ms", "created cold once the pool ran dry")
		row("warm refill", w.RefillS, "s", fmt.Sprintf("from the last burst until %d ready again; the first fill took %v s", w.Size, w.FillS))
	}
	row("exec through the API p50 / p99", fmt.Sprintf("%v / %v", f.ExecAPIP50Ms, f.ExecAPIP99Ms), "ms", "exec `true` on the fake pool, one at a time")
	row("exec on the adapter p50", f.ExecDirectP50Ms, "ms", "fake.Adapter.Exec directly")
	row("exec overhead p50", f.ExecOverheadP50Ms, "ms", "API − adapter")
	row("stream through the API", f.StreamAPIMiBps, "MiB/s", fmt.Sprintf("devhost, cat of %d printable bytes, median of %d", f.StreamBytes, f.StreamTrials))
	row("stream on the adapter", f.StreamDirectMiBps, "MiB/s", "devhost.Adapter.ExecStream directly")
	row("stream ratio", f.StreamRatio, "", fmt.Sprintf("API ÷ adapter, median of %d alternating pairs' ratios", f.StreamTrials))
	row("stream ratio, NUL bytes", f.StreamRatioNUL, "", fmt.Sprintf("head -c N /dev/zero: %v vs %v MiB/s, medians of %d pairs", f.StreamAPINULMiBps, f.StreamDirectNULMBs, f.StreamTrials))
	row("store floor lifecycles/s", f.FloorLifecyclesPerS, "1/s", fmt.Sprintf("admitted Create, Update×3 directly on a %s store; %.0f tx/s", f.Store, f.FloorTxPerS))
	row("store floor ratio", f.StoreFloorRatio, "", "lifecycles/s ÷ floor")
	recNote := fmt.Sprintf("full Reconcile pass over %d sandboxes + instances", f.ReconcileFullN)
	if f.ReconcileExtrapolated == 1 {
		recNote = fmt.Sprintf("EXTRAPOLATED linearly from a full pass over %d (setup budget ran out)", f.ReconcileFullN)
	}
	row(fmt.Sprintf("reconcile %d: time", f.ReconcileN), f.Reconcile100kMs, "ms", recNote)
	row(fmt.Sprintf("reconcile %d: memory", f.ReconcileN), f.Reconcile100kMiB, "MiB", "peak heap growth during the pass")
	row(fmt.Sprintf("reconcile full pass over %d", f.ReconcileFullN), fmt.Sprintf("%v ms, %v MiB", f.ReconcileFullMs, f.ReconcileFullMiB), "", fmt.Sprintf("%v MiB allocated in all", f.ReconcileFullAllocMiB))
	row(fmt.Sprintf("reconcile second pass over %d", f.ReconcileFullN), fmt.Sprintf("%v ms, %v MiB", f.ReconcileAgainMs, f.ReconcileAgainMiB), "", "the same rows read again: the periodic pass's steady state")
	row(fmt.Sprintf("reconcile.Plan only over %d", f.ReconcileN), fmt.Sprintf("%v ms, %v MiB", f.ReconcilePlanMs, f.ReconcilePlanMiB), "", "in-memory input, no store or List")
	row("reconcile setup", f.ReconcileSetupS, "s", fmt.Sprintf("%v rows/s through store.CreateSandbox", f.ReconcileSetupPerS))
	row("peak RSS, whole run", f.PeakRSSTotalMiB, "MiB", "")
	row("total", f.TotalS, "s", fmt.Sprintf("deadline %s", o.timeout))
	var work []string
	for _, h := range f.HostWork {
		work = append(work, fmt.Sprintf("%s %v", h.Phase, h.Ms))
	}
	row("host: fixed CPU work", strings.Join(work, ", "), "ms", "SHA-256 of 8 MiB, median of 5, between sections: more than at the start means the host gave this process less CPU")
	row("host load average (1 min)", fmt.Sprintf("%v → %v", f.LoadAvgStart, f.LoadAvgEnd), "", fmt.Sprintf("%d CPUs; a load above that means other work shared the machine", f.NumCPU))
	tw.Flush()
	for _, n := range r.notes {
		fmt.Fprintln(w, "note:", n)
	}
	fmt.Fprintln(w)
}
