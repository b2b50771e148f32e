// Command differently-bench measures the control plane's own cost in one bounded run
// (issue 7, `make bench`): it starts a real development daemon in-process on loopback
// against the chosen store, drives sandbox lifecycles through the HTTP API on the
// zero-latency fake pool, claims warm sandboxes from a pool on a slower fake backend
// in bursts that drain it, compares exec and streamed exec through the API with the
// same calls made directly on an adapter, issues a lifecycle's store transactions
// directly against a store of the same kind (the floor), and times one reconcile pass
// over many sandboxes and backend instances.
//
// It prints a table for people and, as its last line, one JSON object with every
// figure. It is a measurement tool, not a test: it never runs in `make test` (only a
// tiny smoke run of it does, in main_test.go).
//
//	go run ./cmd/differently-bench [--store sqlite|postgres] [-n 2000] [-c 64] [-timeout 170s]
//	    [-rate 150,300,450] [-paced-n 1000] [-warm-size 32] [-warm-bursts 12]
//	    [-warm-burst 8] [-warm-interval 100ms] [-warm-backend 200ms]
//	    [--reconcile-n 100000] [-cpuprofile FILE] [-only stream,exec,...]
//
// --store postgres uses DIFFERENTLY_TEST_DATABASE_URL, in fresh schemas dropped at the end.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/server/store"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	// store is the store of this run; stores lists every --store given, the first
	// running every section and the others the lifecycles, paced and warm sections only.
	store          string
	stores         []string
	n, c           int
	timeout        time.Duration
	reconcileN     int
	reconcileSetup time.Duration
	execN          int
	// rates are the paced section's arrival rates, pacedN its lifecycles per rate.
	rates           []pacedRate
	pacedN          int
	streamBytes     int64
	cpuProfile      string
	memProfile      string
	databaseBaseURL string
	// only names the sections to run; empty runs them all.
	only []string
	// warm shapes the warm section.
	warm warmOptions
}

// sections are the parts of a run, in the order they run.
var sections = []string{"lifecycles", "paced", "warm", "exec", "stream", "floor", "reconcile"}

// runs reports whether the section is part of this run.
func (o options) runs(section string) bool {
	return len(o.only) == 0 || slices.Contains(o.only, section)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("differently-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeList := fs.String("store", "sqlite", "comma-separated stores to run on, of sqlite (a file in a temporary directory) and postgres (DIFFERENTLY_TEST_DATABASE_URL, fresh schemas); the first runs every section, the others the lifecycles, paced and warm sections, for comparison")
	fs.IntVar(&o.n, "n", 2000, "sandbox lifecycles to run (also the floor's lifecycles)")
	fs.IntVar(&o.c, "c", 64, "concurrency of the lifecycles and of the floor")
	fs.DurationVar(&o.timeout, "timeout", 170*time.Second, "global deadline; the run aborts with an error when it passes")
	fs.IntVar(&o.reconcileN, "reconcile-n", 100000, "sandboxes and backend instances of the reconcile pass")
	fs.DurationVar(&o.reconcileSetup, "reconcile-setup", 60*time.Second, "most time spent storing the reconcile pass's sandboxes; fewer are stored (and the pass extrapolated) when it runs out")
	fs.IntVar(&o.execN, "exec-n", 1000, "exec round trips timed through the API and directly")
	rates := fs.String("rate", "150,300,50%", "comma-separated arrival rates of the paced section: lifecycles per second, or a percentage of the closed loop's lifecycles per second (which needs the lifecycles section)")
	fs.IntVar(&o.pacedN, "paced-n", 1000, "lifecycles of the paced section at each -rate")
	fs.Int64Var(&o.streamBytes, "stream-bytes", 50_000_000, "bytes of output of the streamed exec")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&o.memProfile, "memprofile", "", "write the run's allocations (a heap profile; go tool pprof -sample_index=alloc_space) to this file")
	fs.IntVar(&o.warm.size, "warm-size", 32, "warm section: the warm pool's size")
	fs.IntVar(&o.warm.bursts, "warm-bursts", 12, "warm section: how many bursts of creates")
	fs.IntVar(&o.warm.burst, "warm-burst", 8, "warm section: creates sent at once in each burst")
	fs.DurationVar(&o.warm.interval, "warm-interval", 100*time.Millisecond, "warm section: time between the starts of two bursts")
	fs.DurationVar(&o.warm.backend, "warm-backend", 200*time.Millisecond, "warm section: how long the warm pool's fake backend takes to start a sandbox")
	only := fs.String("only", "", "comma-separated sections to run, of "+strings.Join(sections, ", ")+"; the others report zeros (default all)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *only != "" {
		for s := range strings.SplitSeq(*only, ",") {
			if s = strings.TrimSpace(s); !slices.Contains(sections, s) {
				return o, fmt.Errorf("-only: unknown section %q (sections: %s)", s, strings.Join(sections, ", "))
			}
			o.only = append(o.only, s)
		}
	}
	for r := range strings.SplitSeq(*rates, ",") {
		r = strings.TrimSpace(r)
		num, pct := strings.CutSuffix(r, "%")
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) {
			return o, fmt.Errorf("-rate: %q is neither a positive number of lifecycles per second nor a positive percentage", r)
		}
		if pct && o.runs("paced") && !o.runs("lifecycles") {
			return o, fmt.Errorf("-rate %s: a percentage of the closed loop's throughput needs the lifecycles section", r)
		}
		o.rates = append(o.rates, pacedRate{value: v, percent: pct})
	}
	for st := range strings.SplitSeq(*storeList, ",") {
		st = strings.TrimSpace(st)
		if st != "sqlite" && st != "postgres" {
			return o, fmt.Errorf("--store: each store must be sqlite or postgres, not %q", st)
		}
		if slices.Contains(o.stores, st) {
			return o, fmt.Errorf("--store: %s is listed twice", st)
		}
		o.stores = append(o.stores, st)
	}
	o.store = o.stores[0]
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case o.n < 1 || o.c < 1 || o.execN < 1 || o.reconcileN < 1 || o.streamBytes < 1 || o.pacedN < 1:
		return o, errors.New("-n, -c, -exec-n, -paced-n, --reconcile-n and -stream-bytes must be positive")
	case o.timeout <= 0:
		return o, errors.New("-timeout must be positive")
	case o.warm.size < 1 || o.warm.size > 1000 || o.warm.bursts < 1 || o.warm.burst < 1 || o.warm.bursts*o.warm.burst > 100000:
		return o, errors.New("-warm-size must be between 1 and 1000, -warm-bursts and -warm-burst positive, their product at most 100000")
	case o.warm.interval < 0 || o.warm.backend < 0 || o.warm.backend%time.Millisecond != 0:
		return o, errors.New("-warm-interval and -warm-backend must not be negative; -warm-backend is whole milliseconds")
	}
	if slices.Contains(o.stores, "postgres") {
		o.databaseBaseURL = os.Getenv("DIFFERENTLY_TEST_DATABASE_URL")
		if o.databaseBaseURL == "" {
			return o, errors.New("--store postgres needs DIFFERENTLY_TEST_DATABASE_URL (for example postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
		}
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "differently-bench:", err)
		return 2
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "differently-bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "differently-bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if o.memProfile != "" {
		// Every allocation sampled, so that a short run's allocations add up to what
		// it allocated rather than to a guess from a few samples.
		runtime.MemProfileRate = 1
		defer func() {
			if err := writeMemProfile(o.memProfile); err != nil {
				fmt.Fprintln(stderr, "differently-bench:", err)
			}
		}()
	}
	b := &bench{opts: o, log: stderr, start: time.Now()}
	res, err := b.run()
	if err != nil {
		fmt.Fprintln(stderr, "differently-bench:", err)
		return 1
	}
	printTable(stdout, o, res)
	for _, st := range o.stores[1:] {
		// The other stores for comparison: what a lifecycle costs there, loaded and
		// paced, and warm pools, with the same flags.
		other := o
		other.store = st
		other.only = nil
		for _, sec := range []string{"lifecycles", "paced", "warm"} {
			if o.runs(sec) {
				other.only = append(other.only, sec)
			}
		}
		if len(other.only) == 0 {
			continue
		}
		ob := &bench{opts: other, log: stderr, start: time.Now()}
		ores, err := ob.run()
		if err != nil {
			fmt.Fprintf(stderr, "differently-bench: %s: %v\n", st, err)
			return 1
		}
		printTable(stdout, other, ores)
		if res.figures.Stores == nil {
			res.figures.Stores = map[string]*figures{}
		}
		res.figures.Stores[st] = &ores.figures
	}
	line, err := json.Marshal(res.figures)
	if err != nil {
		fmt.Fprintln(stderr, "differently-bench:", err)
		return 1
	}
	fmt.Fprintln(stdout, string(line))
	return 0
}

func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	// The profile holds what the last collection saw; one now brings it up to date.
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// bench holds one run's shared state.
type bench struct {
	opts  options
	log   io.Writer
	start time.Time
	// phase names what is running, for the error of a run that hits its deadline.
	phase string
	// cpu measures what the closed loop costs in CPU time.
	cpu cpuMeter
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "differently-bench: %5.1fs "+format+"\n", append([]any{time.Since(b.start).Seconds()}, args...)...)
}

// run sets everything up, measures each part in turn and tears everything down.
func (b *bench) run() (res *result, err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.timeout)
	defer cancel()
	defer func() {
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("aborted: the -timeout of %s ran out during %s (%v)", b.opts.timeout, b.phase, err)
		} else if err != nil {
			err = fmt.Errorf("%s: %w", b.phase, err)
		}
	}()

	tmp, err := os.MkdirTemp("", "differently-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// Cleanups (schemas, stores, the daemon) run even after the deadline.
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()

	b.phase = "setup"
	b.progress("starting a development daemon on %s", b.opts.store)
	daemonDB, sideDB := "", "sqlite://"+filepath.Join(tmp, "side.db")
	if b.opts.store == "postgres" {
		for _, dst := range []*string{&daemonDB, &sideDB} {
			u, drop, err := createSchema(ctx, b.opts.databaseBaseURL)
			if err != nil {
				return nil, err
			}
			cleanups = append(cleanups, drop)
			*dst = u
		}
	}
	if daemonDB != "" {
		if daemonDB, err = withAppName(daemonDB); err != nil {
			return nil, err
		}
		b.cpu.base = b.opts.databaseBaseURL
	}
	d, err := startDaemon(ctx, filepath.Join(tmp, "daemon"), daemonDB, b.opts.c)
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, d.stop)

	res = &result{}
	f := &res.figures
	f.Store, f.N, f.C, f.NumCPU = b.opts.store, b.opts.n, b.opts.c, runtime.NumCPU()
	f.LoadAvgStart = loadAvg1()
	f.sampleHost("start")

	if b.opts.runs("lifecycles") {
		b.phase = "lifecycles"
		b.progress("%d lifecycles at concurrency %d on %s", b.opts.n, b.opts.c, b.opts.store)
		if err := b.lifecycles(ctx, d, res); err != nil {
			return nil, err
		}
		f.PeakRSSMiB = round(peakRSSMiB())
	}

	if b.opts.runs("paced") {
		b.phase = "paced lifecycles"
		if err := b.paced(ctx, d, res); err != nil {
			return nil, err
		}
	}

	if b.opts.runs("warm") {
		b.phase = "warm pool"
		w := b.opts.warm
		b.progress("warm: a pool of %d warm sandboxes on a %s backend, %d bursts of %d creates every %s",
			w.size, w.backend, w.bursts, w.burst, w.interval)
		if err := b.warm(ctx, d, res); err != nil {
			return nil, err
		}
	}

	if b.opts.runs("exec") {
		b.phase = "exec overhead"
		b.progress("exec overhead: %d round trips each way", b.opts.execN)
		if err := b.execOverhead(ctx, d, res); err != nil {
			return nil, err
		}
	}

	if b.opts.runs("stream") {
		b.phase = "streamed exec"
		b.progress("streamed exec: %d bytes through the API and directly", b.opts.streamBytes)
		if err := b.stream(ctx, d, filepath.Join(tmp, "devhost-direct"), res); err != nil {
			return nil, err
		}
	}

	var side store.Store
	if b.opts.runs("floor") || b.opts.runs("reconcile") {
		b.phase = "opening the floor store"
		side, err = openStore(ctx, sideDB)
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, func() { side.Close() })
	}

	if b.opts.runs("floor") {
		b.phase = "store floor"
		b.progress("store floor: %d lifecycles of store transactions at concurrency %d", b.opts.n, b.opts.c)
		if err := b.floor(ctx, side, res); err != nil {
			return nil, err
		}
		f.StoreFloorRatio = round(f.LifecyclesPerS / f.FloorLifecyclesPerS)
	}

	if b.opts.runs("reconcile") {
		b.phase = "reconcile"
		b.progress("reconcile: %d sandboxes and instances", b.opts.reconcileN)
		if err := b.reconcile(ctx, side, res); err != nil {
			return nil, err
		}
	}
	f.PeakRSSTotalMiB = round(peakRSSMiB())
	f.LoadAvgEnd = loadAvg1()
	f.sampleHost("end")
	b.phase = "cleanup"
	b.progress("done; cleaning up")
	f.TotalS = round(time.Since(start).Seconds())
	return res, nil
}
