package main

import (
	"fmt"
	"os"

	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestSmallRun runs the whole benchmark with tiny numbers on SQLite, so that the
// command cannot rot: every phase must work and the last line must be the JSON
// object with every figure issue 7 names.
func TestSmallRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--store", "sqlite", "-n", "20", "-c", "4", "--reconcile-n", "500",
		"-exec-n", "10", "-stream-bytes", "100000", "-timeout", "60s", "-rate", "50,10%", "-paced-n", "10",
		"-warm-size", "4", "-warm-bursts", "3", "-warm-burst", "4", "-warm-interval", "50ms", "-warm-backend", "100ms"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	t.Logf("progress:\n%s", stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	var got map[string]any
	if err := json.Unmarshal([]byte(last), &got); err != nil {
		t.Fatalf("last line is not a JSON object: %v\n%s", err, last)
	}
	for _, key := range []string{"create_to_running_p50_ms", "create_to_running_p99_ms",
		"lifecycles_per_s", "exec_overhead_p50_ms", "stream_ratio", "store_floor_ratio",
		"reconcile_100k_ms", "reconcile_100k_mib", "peak_rss_mib"} {
		v, ok := got[key].(float64)
		if !ok {
			t.Errorf("key %s: %v (%T), want a number", key, got[key], got[key])
			continue
		}
		if v < 0 {
			t.Errorf("key %s = %v, want >= 0", key, v)
		}
	}
	for _, key := range []string{"lifecycles_per_s", "stream_ratio", "store_floor_ratio", "reconcile_100k_ms", "peak_rss_mib",
		"cpu_per_lifecycle_process_ms"} {
		if v, _ := got[key].(float64); v <= 0 {
			t.Errorf("key %s = %v, want > 0", key, v)
		}
	}
	var paced struct {
		Paced []pacedFigures `json:"paced"`
	}
	if err := json.Unmarshal([]byte(last), &paced); err != nil {
		t.Fatal(err)
	}
	if len(paced.Paced) != 2 {
		t.Fatalf("paced: %d results, want one for each of -rate 50,10%%", len(paced.Paced))
	}
	// The second rate is a tenth of what the closed loop measured.
	wantRates := []float64{50, round(got["lifecycles_per_s"].(float64) / 10)}
	for i, p := range paced.Paced {
		if p.RatePerS != wantRates[i] || p.PercentOfMax != []float64{0, 10}[i] || p.N != 10 {
			t.Errorf("paced[%d] = rate %v (%v%% of max), n %d; want rate %v, n 10", i, p.RatePerS, p.PercentOfMax, p.N, wantRates[i])
		}
		if p.CreateToRunningP50Ms <= 0 || p.CreateToRunningP99Ms < p.CreateToRunningP50Ms || p.AchievedPerS <= 0 || p.MaxInFlight < 1 || p.HostWorkMs <= 0 {
			t.Errorf("paced[%d] = %+v, want positive latencies (p99 >= p50), a throughput and at least one in flight", i, p)
		}
	}
	// The host's speed is sampled at the start, before each paced rate and at the end.
	var host struct {
		HostWork []hostSample `json:"host_work_ms"`
	}
	if err := json.Unmarshal([]byte(last), &host); err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, h := range host.HostWork {
		if h.Ms <= 0 {
			t.Errorf("host work at %s: %v ms, want > 0", h.Phase, h.Ms)
		}
		phases = append(phases, h.Phase)
	}
	if want := "start,paced 50/s,paced " + fmt.Sprint(wantRates[1]) + "/s,end"; strings.Join(phases, ",") != want {
		t.Errorf("host work sampled at %q, want %q", strings.Join(phases, ","), want)
	}
	var warm struct {
		Warm *warmFigures `json:"warm"`
	}
	if err := json.Unmarshal([]byte(last), &warm); err != nil {
		t.Fatal(err)
	}
	// The first burst finds the pool full: at least its first create is a hit.
	switch w := warm.Warm; {
	case w == nil:
		t.Error("warm: missing")
	case w.Size != 4 || w.Creates != 12 || w.Hits < 1 || w.Hits > w.Creates || w.HitRate != round(float64(w.Hits)/12) ||
		w.HitP50Ms <= 0 || w.HitP99Ms < w.HitP50Ms || w.FillS <= 0 || w.RefillS < 0 || w.BackendCreateMs != 100:
		t.Errorf("warm = %+v, want 12 creates of which some hits, with their latencies", *w)
	case w.Hits < w.Creates && (w.MissP50Ms <= 0 || w.MissP99Ms < w.MissP50Ms):
		t.Errorf("warm = %+v, want the misses' latencies", *w)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", stdout.String())
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--store", "mysql"},
		{"--store", "sqlite,sqlite"},
		{"--store", "sqlite,"},
		{"-n", "0"},
		{"-timeout", "0s"},
		{"extra"},
		{"-only", "stream,nope"},
		{"-rate", "0"},
		{"-rate", "100,fast"},
		{"-rate", "-5"},
		{"-rate", "0%"},
		{"-rate", "%"},
		{"-only", "paced", "-rate", "50%"},
		{"-paced-n", "0"},
		{"-warm-size", "0"},
		{"-warm-bursts", "-1"},
		{"-warm-backend", "1500us"},
		{"-only", "warm,cold"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

// TestOnlyStream runs the stream section alone: the other sections' figures stay zero.
func TestOnlyStream(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"-only", "stream", "-stream-bytes", "100000", "-timeout", "60s"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatal(err)
	}
	if v, _ := got["stream_ratio"].(float64); v <= 0 {
		t.Errorf("stream_ratio = %v, want > 0", got["stream_ratio"])
	}
	if v, _ := got["stream_trials"].(float64); v != 5 {
		t.Errorf("stream_trials = %v, want 5", got["stream_trials"])
	}
	for _, key := range []string{"lifecycles_per_s", "exec_api_p50_ms", "floor_lifecycles_per_s", "reconcile_full_ms"} {
		if v, _ := got[key].(float64); v != 0 {
			t.Errorf("%s = %v, want 0 (section not run)", key, v)
		}
	}
	if got["paced"] != nil {
		t.Errorf("paced = %v, want null (section not run)", got["paced"])
	}
	if got["warm"] != nil {
		t.Errorf("warm = %v, want none (section not run)", got["warm"])
	}
}

// TestTwoStores runs the lifecycles on SQLite and then on PostgreSQL: the last line
// keeps the first store's figures at the top and adds the second's under stores,
// with PostgreSQL's own CPU per lifecycle measured.
func TestTwoStores(t *testing.T) {
	if os.Getenv("DIFFERENTLY_TEST_DATABASE_URL") == "" {
		t.Fatal("DIFFERENTLY_TEST_DATABASE_URL is not set (make test sets it)")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"--store", "sqlite,postgres", "-only", "lifecycles", "-n", "20", "-c", "4", "-timeout", "60s"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var got figures
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatal(err)
	}
	pg := got.Stores["postgres"]
	switch {
	case got.Store != "sqlite" || got.LifecyclesPerS <= 0 || got.CPUPerLifecycleProcessMs <= 0:
		t.Errorf("top level: store %q, %v lifecycles/s, %v ms CPU; want sqlite's figures", got.Store, got.LifecyclesPerS, got.CPUPerLifecycleProcessMs)
	case pg == nil || pg.Store != "postgres" || pg.LifecyclesPerS <= 0 || pg.N != 20:
		t.Errorf("stores.postgres = %+v, want PostgreSQL's lifecycle figures", pg)
	case pg.CPUPerLifecyclePostgresMs <= 0:
		// The test's PostgreSQL runs on this machine (loopback), so its processes
		// are readable.
		t.Errorf("stores.postgres cpu_per_lifecycle_postgres_ms = %v, want > 0", pg.CPUPerLifecyclePostgresMs)
	}
	if len(got.Stores) != 1 {
		t.Errorf("stores has %d entries, want postgres alone", len(got.Stores))
	}
}
