package main

import (
	"github.com/different-ai/differently/internal/tracing"
	"log/slog"

	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/conformance"
	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/adapters/local"
	"github.com/different-ai/differently/server/defaults"
)

const adapterTokenEnv = "DIFFERENTLY_ADAPTER_TOKEN"

func runAdapter(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = adapterServe(ctx, args[1:], stdout, stderr, getenv)
	case "conformance":
		var failed bool
		failed, err = adapterConformance(ctx, args[1:], stdout, stderr, getenv)
		if err == nil && failed {
			return 1
		}
	default:
		err = fmt.Errorf("unknown adapter command %q", args[0])
	}
	if err == nil {
		return 0
	}
	if !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "differently-server adapter %s: %v\n", args[0], err)
	}
	return 2
}

func adapterServe(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("adapter serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("adapter", "", "adapter to serve: devhost, local or fake")
	listen := fs.String("listen", "127.0.0.1:8710", "address to listen on")
	root := fs.String("root", "", "devhost, local: directory holding the sandboxes (default: a per-user data folder)")
	configJSON := fs.String("config-json", "", "adapter pool config as a JSON object (fake: fault injection keys)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	token := getenv(adapterTokenEnv)
	if token == "" && !isLoopback(*listen) {
		return fmt.Errorf("refusing to serve on %s without a token: set %s, or listen on a loopback address", *listen, adapterTokenEnv)
	}
	a, err := buildAdapter(ctx, *kind, *root, *configJSON, getenv)
	if err != nil {
		return err
	}
	if f, ok := a.(*fake.Adapter); ok {
		a = streamDropper{Adapter: f, log: stderr}
	}
	tp, stopTracing, err := tracing.FromEnv(ctx, getenv, "differently-adapter")
	if err != nil {
		return err
	}
	defer flushTraces(slog.New(slog.NewTextHandler(stderr, nil)), stopTracing)
	var hopts []adapterhttp.HandlerOption
	if tp != nil {
		hopts = append(hopts, adapterhttp.WithTracerProvider(tp))
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           adapterhttp.Handler(a, token, hopts...),
		ReadHeaderTimeout: 10 * time.Second,
	}
	// Tests and scripts read this line to learn the port chosen for :0.
	fmt.Fprintf(stdout, "adapter serve: %s on http://%s\n", a.Info().Kind, ln.Addr())

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	// Let requests in flight finish; a long exec is cut off after the grace period.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

func buildAdapter(ctx context.Context, kind, root, configJSON string, getenv func(string) string) (adapters.ExecutionAdapter, error) {
	cfg := map[string]any{}
	if configJSON != "" {
		dec := json.NewDecoder(strings.NewReader(configJSON))
		dec.UseNumber()
		if err := dec.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("--config-json: %w", err)
		}
	}
	switch kind {
	case devhost.Kind, local.Kind:
		if root == "" {
			dir, err := dataDirFor(getenv, "--root")
			if err != nil {
				return nil, err
			}
			root = filepath.Join(dir, "adapter-"+kind)
		}
		if _, set := cfg["root"]; !set {
			cfg["root"] = root
		}
		if kind == local.Kind {
			return local.FromConfig(ctx, cfg)
		}
		return devhost.FromConfig(cfg)
	case "fake":
		if root != "" {
			return nil, errors.New("--root applies to devhost and local only")
		}
		return fake.FromConfig(cfg)
	case "":
		return nil, errors.New("--adapter is required (devhost, local or fake)")
	default:
		return nil, fmt.Errorf("--adapter %q: this command serves devhost, local or fake; other backends have their own servers", kind)
	}
}

// dataDirFor is the per-user data folder (defaults.DataDir); when there is none, the
// error names flag, which gives the command another.
func dataDirFor(getenv func(string) string, flag string) (string, error) {
	dir, err := defaults.DataDir(getenv)
	if err != nil {
		return "", fmt.Errorf("%w, or pass %s", err, flag)
	}
	return dir, nil
}

// isLoopback reports whether addr (host:port) can only be reached from this machine.
// An empty host means every interface.
func isLoopback(addr string) bool {
	_, _, err := net.SplitHostPort(addr)
	return err == nil && adapterhttp.IsLoopbackHost(addr)
}

func adapterConformance(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (failed bool, err error) {
	fs := flag.NewFlagSet("adapter conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("endpoint", "", "base URL of the adapter (the client adds /adapter/v1)")
	opts := conformance.Options{}
	fs.StringVar(&opts.Template, "template", "", "template for every instance the suite creates")
	fs.StringVar(&opts.WorkDir, "workdir", "", "writable directory inside the sandbox for the suite's files (default: the adapter's default directory)")
	fs.BoolVar(&opts.SimulatedExec, "simulated-exec", false, "the adapter's exec does not run commands (the fake): skip the checks that need a shell")
	fs.DurationVar(&opts.CheckTimeout, "check-timeout", 2*time.Minute, "time limit of each check")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if *endpoint == "" {
		return false, errors.New("--endpoint is required")
	}
	token := getenv(adapterTokenEnv)
	client, err := adapterhttp.NewClient(*endpoint, token)
	if err != nil {
		return false, err
	}
	if err := client.Refresh(ctx); err != nil {
		return false, fmt.Errorf("cannot use %s: %w", *endpoint, err)
	}
	info := client.Info()
	fmt.Fprintf(stdout, "adapter %s %s (protocol %s) at %s\n", info.Kind, info.Version, info.Protocol, *endpoint)
	if token == "" {
		fmt.Fprintf(stdout, "no token (%s is empty): the authentication checks are skipped\n", adapterTokenEnv)
	}
	// The raw HTTP checks first: they see what the client hides (statuses, headers,
	// refusals of requests the client would never send).
	report := conformance.RunHTTP(ctx, *endpoint, token, opts)
	report.Results = append(report.Results, conformance.Run(ctx, client, opts).Results...)
	var pass, fail, skip int
	for _, r := range report.Results {
		line := fmt.Sprintf("%-4s %s (%s)", strings.ToUpper(string(r.Status)), r.Name, r.Duration.Round(time.Millisecond))
		if r.Message != "" {
			line += ": " + r.Message
		}
		fmt.Fprintln(stdout, line)
		switch r.Status {
		case conformance.Pass:
			pass++
		case conformance.Fail:
			fail++
		default:
			skip++
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed, %d skipped\n", pass, fail, skip)
	return report.Failed(), nil
}
