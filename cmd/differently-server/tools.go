package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/preflight"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/open"
)

// runPreflight prints one line per finding and exits 1 when any is an error.
func runPreflight(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config file to check (required)")
	dev := fs.Bool("dev", false, "check as development mode would run it (devhost and fake allowed)")
	timeout := fs.Duration("probe-timeout", 10*time.Second, "time limit of each pool probe")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "preflight: --config is required")
		return 2
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		// The loader reports every problem, one per line.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stdout, "error  config: %s\n", line)
		}
		return 1
	}
	cfg.ApplyEnv(getenv)
	findings := preflight.Run(ctx, cfg, preflight.Options{
		Dev:           *dev,
		Getenv:        getenv,
		SchemaVersion: open.SchemaVersion,
		Registry:      pools.DefaultRegistry(*dev),
		ProbeTimeout:  *timeout,
	})
	for _, f := range findings {
		fmt.Fprintf(stdout, "%-5s  %s: %s\n", f.Level, f.Subject, f.Message)
	}
	if preflight.Failed(findings) {
		return 1
	}
	return 0
}

// runToken creates an API token straight in the database: the way to the first admin
// token of a production installation, before any token exists to call the API with.
func runToken(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprintln(stderr, "usage: differently-server token create --config FILE (--admin | --project P [--org O]) [--name N]")
		return 2
	}
	fs := flag.NewFlagSet("token create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config file naming the database (required)")
	admin := fs.Bool("admin", false, "an admin token")
	project := fs.String("project", "", "a token scoped to this project")
	org := fs.String("org", "default", "the project's organisation")
	name := fs.String("name", "", "a name to recognise the token by")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	err := func() error {
		if *configPath == "" {
			return errors.New("--config is required")
		}
		if *admin == (*project != "") {
			return errors.New("give exactly one of --admin and --project")
		}
		// Everything the API would refuse is refused before the database is opened.
		orgSet := false
		fs.Visit(func(f *flag.Flag) { orgSet = orgSet || f.Name == "org" })
		if *admin && orgSet {
			return errors.New("an admin token has no organisation: leave out --org")
		}
		if len(*name) > 255 {
			return errors.New("--name is over 255 bytes")
		}
		if !*admin {
			if err := api.CheckTenantName("--org", *org); err != nil {
				return err
			}
			if err := api.CheckTenantName("--project", *project); err != nil {
				return err
			}
		}
		cfg, err := config.Load(*configPath)
		if err != nil {
			return err
		}
		cfg.ApplyEnv(getenv)
		if cfg.Database.URL == "" {
			return errors.New("the config names no database (database.url or DIFFERENTLY_DATABASE_URL)")
		}
		st, err := open.Open(ctx, cfg.Database.URL)
		if err != nil {
			return err
		}
		defer st.Close()
		tok := store.Token{Scope: store.ScopeAdmin, Name: *name}
		if !*admin {
			tok = store.Token{Scope: store.ScopeProject, Org: *org, Project: *project, Name: *name}
		}
		secret, err := daemon.CreateToken(ctx, st, clock.Real{}.Now(), tok)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, secret)
		return nil
	}()
	if err != nil {
		fmt.Fprintf(stderr, "token create: %v\n", err)
		return 1
	}
	return 0
}
