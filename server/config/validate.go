package config

import (
	"github.com/different-ai/differently/server/store"

	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/netpolicy"
)

// ValidateOptions say what the running daemon accepts.
type ValidateOptions struct {
	// Dev allows the development-only adapters and a missing database url (dev mode
	// keeps its database in the data directory).
	Dev bool
	// KnownAdapters are the adapter kinds this build can construct (the pool
	// registry's Kinds).
	KnownAdapters []string
	// DevOnlyAdapters are the kinds allowed only with Dev (the pool registry's
	// DevOnlyKinds: devhost runs sandboxes as host processes without isolation, fake
	// runs nothing at all).
	DevOnlyAdapters []string
	// CheckPoolConfig checks a pool's adapter config (pools.Registry.CheckConfig):
	// an unknown key, a value of the wrong type, a missing required key or an
	// endpoint that is not http or https is a problem under the pool's config key.
	// Nil checks nothing.
	CheckPoolConfig func(ctx context.Context, kind string, cfg map[string]any) error
}

// Problem is one thing wrong with a config. Validate joins them with errors.Join, so
// callers that want them one by one (preflight) unwrap the joined error.
type Problem struct {
	// Pool names the pool the problem is in; "" for settings outside pools.
	Pool string
	// Key is the offending key's path: "pools[0].maxConcurrency", "listen".
	Key     string
	Message string
}

func (p *Problem) Error() string {
	if p.Pool != "" {
		return fmt.Sprintf("pool %q: %s: %s", p.Pool, p.Key, p.Message)
	}
	return p.Key + ": " + p.Message
}

// Problems splits an error from Validate into its problems.
func Problems(err error) []*Problem {
	var out []*Problem
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var p *Problem
		if errors.As(err, &p) {
			out = append(out, p)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// Validate checks what the file's shape cannot express and reports every problem, not
// just the first, so an operator fixes the file in one pass. Call ApplyEnv first: the
// database url may come from the environment.
func (c *Config) Validate(opts ValidateOptions) error {
	v := validator{}
	v.global(c, opts)
	seen := map[string]int{}
	for i, p := range c.Pools {
		v.pool(i, p, opts, seen)
	}
	return errors.Join(v.problems...)
}

type validator struct {
	problems []error
	// allowed is the credentials allowlist without the entries that have problems.
	allowed api.EnvAllowlist
}

func (v *validator) add(pool, key, format string, args ...any) {
	v.problems = append(v.problems, &Problem{Pool: pool, Key: key, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) global(c *Config, opts ValidateOptions) {
	if strings.TrimSpace(c.Database.URL) == "" && !opts.Dev {
		v.add("", "database.url", "required (or set %s)", EnvDatabaseURL)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		v.add("", "listen", "want host:port, got %q", c.Listen)
	}
	if c.MaxConnections < 0 {
		v.add("", "maxConnections", "must be 0 (the default) or more, got %d", c.MaxConnections)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		v.add("", "tls", "certFile and keyFile go together: set both or neither")
	}
	s := c.Scheduler
	for _, f := range []struct {
		key string
		val int
	}{
		{"provisionTimeoutSeconds", s.ProvisionTimeoutSeconds},
		{"maxAttempts", s.MaxAttempts},
		{"reconcileIntervalSeconds", s.ReconcileIntervalSeconds},
		{"terminateTimeoutSeconds", s.TerminateTimeoutSeconds},
		{"maxQueued", s.MaxQueued},
		{"defaultMaxStarting", s.DefaultMaxStarting},
		{"reconcilePassesKept", s.ReconcilePassesKept},
	} {
		if f.val < 1 {
			v.add("", "scheduler."+f.key, "must be at least 1, got %d", f.val)
		}
	}
	if c.Events.KeepPerSandbox < 0 {
		v.add("", "events.keepPerSandbox", "must be 0 (keep every event) or more, got %d", c.Events.KeepPerSandbox)
	}
	if c.Events.KeepAfterTerminalSeconds < 0 {
		v.add("", "events.keepAfterTerminalSeconds", "must be 0 (keep them) or more, got %d", c.Events.KeepAfterTerminalSeconds)
	}
	f := c.Files
	if f.MaxTransfers < 1 {
		v.add("", "files.maxTransfers", "must be at least 1, got %d", f.MaxTransfers)
	}
	if f.MaxProjectTransfers < 1 {
		v.add("", "files.maxProjectTransfers", "must be at least 1, got %d", f.MaxProjectTransfers)
	}
	if f.LargeTransferBytes < 1 {
		v.add("", "files.largeTransferBytes", "must be at least 1, got %d", f.LargeTransferBytes)
	}
	for i, p := range c.PoolCredentials.AllowedEnv {
		if err := api.CheckEnvPattern(p); err != nil {
			v.add("", fmt.Sprintf("poolCredentials.allowedEnv[%d]", i), "%s", api.AsError(err).Message)
		}
	}
	v.allowed = c.CredentialsAllowlist()
	for _, l := range []struct {
		key  string
		list []string
	}{{"allowedNetworks", c.PoolEndpoints.AllowedNetworks}, {"deniedNetworks", c.PoolEndpoints.DeniedNetworks}} {
		key := l.key
		for i, e := range l.list {
			if _, err := netpolicy.ParsePrefix(e); err != nil {
				v.add("", fmt.Sprintf("poolEndpoints.%s[%d]", key, i), "%s", err)
			}
		}
	}
}

// pool checks one pool. Problems name the pool when it has a name worth quoting, and
// always the key path, so two pools with the same bad name can still be told apart.
func (v *validator) pool(i int, p PoolConfig, opts ValidateOptions, seen map[string]int) {
	at := func(key string) string { return fmt.Sprintf("pools[%d].%s", i, key) }
	name := p.Name
	switch {
	case p.Name == "":
		v.add("", at("name"), "required")
	case !api.ValidName(p.Name):
		v.add(name, at("name"), "must be 1-63 lowercase letters, digits or dashes, starting and ending with a letter or digit")
	}
	if first, dup := seen[p.Name]; dup && p.Name != "" {
		v.add(name, at("name"), "duplicate pool name (first used by pools[%d])", first)
	} else {
		seen[p.Name] = i
	}

	switch {
	case p.Adapter == "":
		v.add(name, at("adapter"), "required (known kinds: %s)", strings.Join(sorted(opts.KnownAdapters), ", "))
	case !slices.Contains(opts.KnownAdapters, p.Adapter):
		v.add(name, at("adapter"), "adapter kind %q is not in this build (known kinds: %s)",
			p.Adapter, strings.Join(sorted(opts.KnownAdapters), ", "))
	case slices.Contains(opts.DevOnlyAdapters, p.Adapter) && !opts.Dev:
		v.add(name, at("adapter"), "adapter %s is only allowed in development mode (--dev)", p.Adapter)
	}

	if slices.Contains(opts.KnownAdapters, p.Adapter) {
		// For an unknown kind the adapter problem says enough; its trust rule is moot.
		v.trust(name, at("trust"), p)
	} else if p.Trust != "" && p.Trust.Validate() != nil {
		v.add(name, at("trust"), "must be %q or %q, got %q", api.TrustPrivate, api.TrustExternal, string(p.Trust))
	}

	if p.MaxConcurrency < 0 {
		v.add(name, at("maxConcurrency"), "must not be negative, got %d", p.MaxConcurrency)
	}
	if p.MaxStarting < 0 {
		v.add(name, at("maxStarting"), "must not be negative, got %d", p.MaxStarting)
	}
	for _, c := range []struct {
		key string
		val float64
	}{
		{"costModel.cpuHour", p.CostModel.CPUHour},
		{"costModel.memoryGiBHour", p.CostModel.MemoryGiBHour},
	} {
		if c.val < 0 || math.IsNaN(c.val) || math.IsInf(c.val, 0) {
			v.add(name, at(c.key), "must be a finite number not below 0, got %v", c.val)
		}
	}
	if err := adapters.ValidateDeclaredFeatures(p.Features); err != nil {
		msg := err.Error()
		if e := api.AsError(err); e != nil {
			msg = e.Message
		}
		v.add(name, at("features"), "%s (known: %s)", msg, strings.Join(adapters.AllFeatures(), ", "))
	}
	if err := store.ValidateWarm(name, p.StoreWarm()); err != nil {
		v.add(name, at("warm"), "%s", api.Message(err))
	}
	if err := v.allowed.Check(p.Credentials.Env); err != nil {
		v.add(name, at("credentials.env"), "%s", api.AsError(err).Message)
	}
	if opts.CheckPoolConfig != nil && slices.Contains(opts.KnownAdapters, p.Adapter) {
		if err := opts.CheckPoolConfig(context.Background(), p.Adapter, p.Config); err != nil {
			key, msg := at("config"), err.Error()
			if e := api.AsError(err); e != nil {
				msg = e.Message
				if k, ok := e.Details["key"].(string); ok && k != "" {
					key += "." + k
				}
			}
			v.add(name, key, "%s", msg)
		}
	}
}

func (v *validator) trust(name, key string, p PoolConfig) {
	if p.Trust != "" {
		if err := p.Trust.Validate(); err != nil {
			v.add(name, key, "must be %q or %q, got %q", api.TrustPrivate, api.TrustExternal, string(p.Trust))
			return
		}
	}
	if forced, ok := forcedTrust[p.Adapter]; ok && p.Trust != "" && p.Trust != forced {
		v.add(name, key, "adapter %s always runs on a third party's infrastructure: trust must be %q", p.Adapter, forced)
		return
	}
	if p.EffectiveTrust() == "" {
		v.add(name, key, "required for adapter %s: %q (infrastructure you control) or %q (a third party's)",
			p.Adapter, api.TrustPrivate, api.TrustExternal)
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
