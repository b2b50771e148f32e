package main

import (
	"github.com/different-ai/differently/internal/tracing"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/pools"
)

// loadConfig reads and validates a config file for the given mode.
func loadConfig(path string, dev bool) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	reg := pools.DefaultRegistry(dev)
	reg.SetEndpointPolicy(cfg.EndpointPolicy(dev))
	if err := cfg.Validate(config.ValidateOptions{Dev: dev, KnownAdapters: reg.Kinds(), CheckPoolConfig: reg.CheckConfig}); err != nil {
		return nil, err
	}
	return cfg, nil
}

// daemonFlags are the daemon's flags: one list for parsing and for the help text, so
// that --help cannot leave one out.
type daemonFlags struct {
	fs                   *flag.FlagSet
	dev, accessLog       *bool
	dataDir, listen      *string
	configPath, logLevel *string
	grace                *time.Duration
}

func newDaemonFlags() *daemonFlags {
	fs := flag.NewFlagSet("differently-server", flag.ContinueOnError)
	return &daemonFlags{
		fs:         fs,
		dev:        fs.Bool("dev", false, "development mode: embedded SQLite, devhost, fake and (where bwrap runs) local pools, an admin token in the data directory"),
		dataDir:    fs.String("data-dir", "", "development mode: the `dir`ectory of the database, sandboxes and admin token (default: a per-user data folder)"),
		listen:     fs.String("listen", "", "`address` to listen on: host:port, or a port alone for 127.0.0.1 (default "+defaults.Listen+")"),
		configPath: fs.String("config", "", "config `file` (required without --dev)"),
		logLevel:   fs.String("log-level", "info", "log `level`: debug, info, warn or error"),
		accessLog:  fs.Bool("access-log", false, "log every API request (method, path, status, duration, remote address, User-Agent)"),
		grace:      fs.Duration("shutdown-grace", 30*time.Second, "the `time` requests in flight may run after SIGTERM or Ctrl-C; a second signal stops at once"),
	}
}

// printDaemonFlags writes one line per daemon flag, in the --name form the usage and
// the docs use.
func printDaemonFlags(w io.Writer) {
	fmt.Fprintln(w, "daemon flags:")
	newDaemonFlags().fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		arg := "--" + f.Name
		if name != "" {
			arg += " " + strings.ToUpper(name)
		}
		if f.DefValue != "" && f.DefValue != "false" {
			help += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  %-24s %s\n", arg, help)
	})
}

func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	flags := newDaemonFlags()
	fs := flags.fs
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs.Output()) }
	dev, dataDir, listen, configPath := flags.dev, flags.dataDir, flags.listen, flags.configPath
	logLevel, accessLog, grace := flags.logLevel, flags.accessLog, flags.grace
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "differently-server: %v\n", err)
		return 1
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail(fmt.Errorf("--log-level: %w", err))
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *grace <= 0 {
		return fail(errors.New("--shutdown-grace must be positive"))
	}
	opts := daemon.Options{Dev: *dev, Listen: *listen, Getenv: getenv, Logger: logger, Stdout: stdout, ShutdownGrace: *grace, AccessLog: *accessLog}
	switch {
	case *configPath != "":
		cfg, err := loadConfig(*configPath, *dev)
		if err != nil {
			return fail(err)
		}
		opts.Config = cfg
	case !*dev:
		return fail(errors.New("--config FILE is required without --dev"))
	}
	if *dev {
		opts.DataDir = *dataDir
		if opts.DataDir == "" && opts.Config != nil {
			opts.DataDir = opts.Config.DataDir
		}
		if opts.DataDir == "" {
			dir, err := dataDirFor(getenv, "--data-dir")
			if err != nil {
				return fail(err)
			}
			opts.DataDir = dir
		}
		if abs, err := filepath.Abs(opts.DataDir); err == nil {
			opts.DataDir = abs
		}
	} else if *dataDir != "" {
		return fail(errors.New("--data-dir applies to --dev only"))
	} else if opts.Config != nil && opts.Config.DataDir != "" {
		// Refusing the key would stop files that carried it, harmlessly, until now.
		logger.Warn("dataDir in the config file applies to --dev only; outside it everything is in the database, and the key is ignored")
	}
	tp, stopTracing, err := tracing.FromEnv(ctx, getenv, "differently-server")
	if err != nil {
		return fail(err)
	}
	defer flushTraces(logger, stopTracing)
	opts.TracerProvider = tp
	d, err := daemon.New(ctx, opts)
	if err != nil {
		return fail(err)
	}
	logger.Info("differently-server listening", "url", d.URL(), "dev", *dev, "dataDir", opts.DataDir, "database", d.Database())
	fmt.Fprintf(stdout, "differently-server listening on %s\n", d.URL())
	if path := d.AdminTokenPath(); path != "" {
		// Said at every start, not only the first, since the folder is per-user by
		// default and the walk-through needs the token from it.
		fmt.Fprintf(stdout, "admin token file: %s\n", path)
	}
	if err := d.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// flushTraces sends the spans still buffered before the process exits, within a
// bound: an unreachable collector must not hold the exit up.
func flushTraces(log *slog.Logger, stop func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		log.Warn("flushing traces", "error", err)
	}
}
