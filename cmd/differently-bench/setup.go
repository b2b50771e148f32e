package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/open"
)

// runningDaemon is the in-process daemon and an admin client for its API.
type runningDaemon struct {
	d      *daemon.Daemon
	client *client.Client
	// requests counts every HTTP request the client sent (retries included).
	requests atomic.Int64
	// passes counts scheduler passes, direct the Creates and Deletes the API handed
	// to the scheduler; requeued and started sum their results.
	passes, direct, requeued, started atomic.Int64
	stop                              func()
}

// startDaemon runs a development daemon (the devhost and fake pools, an admin token in
// dataDir) on a loopback port, on dbURL when set and on SQLite in dataDir otherwise.
func startDaemon(ctx context.Context, dataDir, dbURL string, conc int) (*runningDaemon, error) {
	r := &runningDaemon{}
	opts := daemon.Options{
		Dev:     true,
		DataDir: dataDir,
		Listen:  "127.0.0.1:0",
		// Nothing from the environment: DIFFERENTLY_DATABASE_URL must not redirect the run.
		Getenv:        func(string) string { return "" },
		ShutdownGrace: 5 * time.Second,
		OnSchedulerPass: func(res scheduler.Result) {
			if res.Pass == scheduler.PassDirect {
				r.direct.Add(1)
			} else {
				r.passes.Add(1)
			}
			r.requeued.Add(int64(res.Requeued))
			r.started.Add(int64(res.Started))
		},
	}
	if dbURL != "" {
		cfg := config.Default()
		cfg.Database.URL = dbURL
		opts.Config = cfg
	}
	d, err := daemon.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	r.d = d
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	r.stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, daemon.AdminTokenFile))
	if err != nil {
		r.stop()
		return nil, err
	}
	// A benchmark client keeps a connection per worker: the default of two idle
	// connections per host would measure TCP handshakes instead of the daemon.
	tr := &http.Transport{
		Proxy:               nil, // loopback only
		MaxIdleConns:        conc + 16,
		MaxIdleConnsPerHost: conc + 16,
		IdleConnTimeout:     90 * time.Second,
	}
	hc := &http.Client{Transport: countingTransport{base: tr, n: &r.requests}}
	r.client, err = client.New(d.URL(), strings.TrimSpace(string(tok)), client.WithHTTP(hc))
	if err != nil {
		r.stop()
		return nil, err
	}
	// The lifecycles must land on the zero-latency fake pool, and it must be there.
	pools, err := r.client.ListPools(ctx)
	if err != nil {
		r.stop()
		return nil, fmt.Errorf("list pools: %w", err)
	}
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	for _, want := range []string{"fake", "devhost"} {
		if !slices.Contains(names, want) {
			r.stop()
			return nil, fmt.Errorf("the development daemon has no %q pool (it has %v)", want, names)
		}
	}
	// The fake pool starts a sandbox in no time, so it may start as many at once as
	// the benchmark runs lifecycles; the default maxStarting (8 per replica) is for
	// backends whose starts take seconds.
	if _, err := r.client.PatchPool(ctx, "fake", client.PoolPatch{MaxStarting: &conc}); err != nil {
		r.stop()
		return nil, fmt.Errorf("set the fake pool's maxStarting: %w", err)
	}
	return r, nil
}

type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.base.RoundTrip(req)
}

// createSchema makes an empty PostgreSQL schema on base and returns a URL that puts
// it first on the search_path, and a function dropping it.
func createSchema(ctx context.Context, base string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connect to DIFFERENTLY_TEST_DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "bench_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		return "", nil, err
	}
	drop := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, base)
		if err != nil {
			fmt.Fprintf(os.Stderr, "differently-bench: drop schema %s: %v\n", schema, err)
			return
		}
		defer conn.Close(cctx)
		if _, err := conn.Exec(cctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			fmt.Fprintf(os.Stderr, "differently-bench: drop schema %s: %v\n", schema, err)
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema) // pgx passes unknown parameters as runtime parameters
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// openStore opens a store of the same kind as the daemon's, the same way the daemon
// does (same driver defaults, same pool sizes).
func openStore(ctx context.Context, dbURL string) (store.Store, error) {
	return open.Open(ctx, dbURL)
}

// peakRSSMiB is the process's peak resident set size so far (VmHWM), in MiB.
func peakRSSMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(fields[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// loadAvg1 is the host's one-minute load average.
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[0], 64)
	return v
}

// percentile is the nearest-rank q-quantile (0 < q <= 1) of ds, in milliseconds.
func percentile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	i = min(max(i, 0), len(s)-1)
	return ms(s[i])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// workers runs job(i) for i in [0, n) on conc goroutines, stopping at the first error
// or when ctx ends, and returns that first error (or ctx's).
func workers(ctx context.Context, n, conc int, job func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := job(ctx, i); err != nil {
					cancel(err) // only the first cause is kept
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
