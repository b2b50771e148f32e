package main

import (
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
	"github.com/different-ai/differently/server/pools"
)

// loadConfig reads and validates a config file for the given mode.
func loadConfig(path string, dev bool) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(config.ValidateOptions{Dev: dev, KnownAdapters: pools.DefaultRegistry(dev).Kinds()}); err != nil {
		return nil, err
	}
	return cfg, nil
}

func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("differently-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dev := fs.Bool("dev", false, "development mode: embedded SQLite, devhost and fake pools, an admin token in the data directory")
	dataDir := fs.String("data-dir", "", "development mode: where the database, sandboxes and admin token live (default: a per-user data folder)")
	listen := fs.String("listen", "", "address to listen on (default 127.0.0.1:8700)")
	configPath := fs.String("config", "", "config file (required without --dev)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	accessLog := fs.Bool("access-log", false, "log every API request (method, path, status, duration, remote address, User-Agent)")
	grace := fs.Duration("shutdown-grace", 30*time.Second, "how long requests in flight may run after SIGTERM or Ctrl-C; a second signal stops at once")
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
			dir, err := dataDirFor(getenv)
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
	d, err := daemon.New(ctx, opts)
	if err != nil {
		return fail(err)
	}
	logger.Info("differently-server listening", "url", d.URL(), "dev", *dev, "dataDir", opts.DataDir, "database", d.Database())
	fmt.Fprintf(stdout, "differently-server listening on %s\n", d.URL())
	if err := d.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}
