// Package preflight checks, before the daemon starts, everything an operator can get
// wrong outside the code: the config, the TLS files, the database, every credential
// reference and every pool's backend. It reports every problem at once, one finding
// per line, and never prints a secret.
package preflight

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/redact"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/open"
)

// Finding levels.
const (
	LevelError = "error"
	LevelOK    = "ok"
)

// DefaultProbeTimeout bounds each pool's probe and the database check.
const DefaultProbeTimeout = 10 * time.Second

// Finding is one line of the report.
type Finding struct {
	Level string // LevelError or LevelOK
	// Subject is what the finding is about: "config", "tls", "database", "pool lab-fleet".
	Subject string
	Message string
}

func (f Finding) String() string {
	return fmt.Sprintf("%-5s %s: %s", f.Level, f.Subject, f.Message)
}

// Failed reports whether any finding is an error.
func Failed(findings []Finding) bool {
	for _, f := range findings {
		if f.Level == LevelError {
			return true
		}
	}
	return false
}

// Options say how to reach the outside world; zero values take the production ones.
type Options struct {
	Dev bool
	// Getenv resolves the database url override and credentials; os.Getenv when nil.
	Getenv func(string) string
	// SchemaVersion reads the database's migration version and this build's
	// latest without changing anything; open.SchemaVersion when nil. Preflight
	// never migrates: running a new build's preflight before an upgrade must leave
	// the schema as the running replicas know it.
	SchemaVersion func(ctx context.Context, url string) (current, latest int, err error)
	// Registry builds the pools' adapters; pools.DefaultRegistry(Dev) when nil.
	Registry *pools.Registry
	// ProbeTimeout bounds each pool's probe and the database check.
	ProbeTimeout time.Duration
}

// Run checks cfg and returns the findings: config problems first, then TLS, the
// database and each pool in file order. cfg is not modified.
func Run(ctx context.Context, cfg *config.Config, opts Options) []Finding {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.SchemaVersion == nil {
		opts.SchemaVersion = open.SchemaVersion
	}
	if opts.Registry == nil {
		opts.Registry = pools.DefaultRegistry(opts.Dev)
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	c := *cfg
	c.ApplyEnv(opts.Getenv)

	// The file's endpoint networks hold for the checks and the probes as for the
	// daemon.
	opts.Registry.SetEndpointPolicy(c.EndpointPolicy(opts.Dev))
	r := &run{opts: opts}
	r.allowed = c.CredentialsAllowlist()
	badPools := r.validate(&c)
	r.checkTLS(c.TLS)
	r.checkDatabase(ctx, c.Database.URL)
	r.checkPools(ctx, c.Pools, badPools)

	for i := range r.findings {
		msg := r.findings[i].Message
		// Last line of defence: whatever an adapter or a driver put in a message, no
		// secret this run read leaves it.
		msg = redact.String(msg, r.secrets...)
		r.findings[i].Message = oneLine(msg)
	}
	return r.findings
}

// oneLine folds a multi-line message (pgx lists every address it tried) so that each
// finding stays one line of the report.
func oneLine(msg string) string {
	var parts []string
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, " ")
}

type run struct {
	opts     Options
	findings []Finding
	secrets  []string
	// allowed is the config's credentials allowlist.
	allowed api.EnvAllowlist
}

func (r *run) add(level, subject, format string, args ...any) {
	r.findings = append(r.findings, Finding{Level: level, Subject: subject, Message: fmt.Sprintf(format, args...)})
}

func (r *run) secret(s string) {
	if s != "" {
		r.secrets = append(r.secrets, s)
	}
}

// validate reports each config problem and returns the indexes of pools that have one:
// building those would only repeat the problem in other words.
func (r *run) validate(c *config.Config) map[int]bool {
	bad := map[int]bool{}
	err := c.Validate(config.ValidateOptions{Dev: r.opts.Dev, KnownAdapters: r.opts.Registry.Kinds(),
		DevOnlyAdapters: r.opts.Registry.DevOnlyKinds(), CheckPoolConfig: r.opts.Registry.CheckConfig})
	for _, p := range config.Problems(err) {
		subject := "config"
		if p.Pool != "" {
			subject = "pool " + p.Pool
		}
		var i int
		if _, scanErr := fmt.Sscanf(p.Key, "pools[%d]", &i); scanErr == nil {
			bad[i] = true
		}
		r.add(LevelError, subject, "%s: %s", p.Key, p.Message)
	}
	if err == nil {
		noun := "pools"
		if len(c.Pools) == 1 {
			noun = "pool"
		}
		r.add(LevelOK, "config", "valid, %d %s", len(c.Pools), noun)
	}
	return bad
}

func (r *run) checkTLS(t config.TLS) {
	if !t.Enabled() {
		return
	}
	readable := true
	for _, f := range []struct{ key, path string }{{"certFile", t.CertFile}, {"keyFile", t.KeyFile}} {
		if f.path == "" {
			continue // validation already said both are needed
		}
		if _, err := os.ReadFile(f.path); err != nil {
			readable = false
			r.add(LevelError, "tls", "%s: cannot read %s: %v", f.key, f.path, pathlessErr(err))
		}
	}
	if !readable || t.CertFile == "" || t.KeyFile == "" {
		return
	}
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		r.add(LevelError, "tls", "certFile and keyFile do not load as a key pair: %v", err)
		return
	}
	r.add(LevelOK, "tls", "certificate and key load")
}

// pathlessErr drops the *PathError wrapping, whose path the message already names.
func pathlessErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func (r *run) checkDatabase(ctx context.Context, dbURL string) {
	if dbURL == "" {
		if r.opts.Dev {
			r.add(LevelOK, "database", "no url: dev mode keeps its database in the data directory")
		}
		return // outside dev, validation reported it
	}
	if u, err := url.Parse(dbURL); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		r.secret(pw)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	defer cancel()
	current, latest, err := r.opts.SchemaVersion(ctx, dbURL)
	switch {
	case err != nil:
		r.add(LevelError, "database", "cannot open: %v", err)
	case current > latest:
		r.add(LevelError, "database", "the schema is at version %d, newer than this build's %d: the daemon would refuse to start", current, latest)
	case current < latest:
		r.add(LevelOK, "database", "reachable; schema at version %d, and the daemon applies %d pending migration(s) when it starts (preflight changes nothing)", current, latest-current)
	default:
		r.add(LevelOK, "database", "reachable; schema up to date (version %d)", current)
	}
}

// checkPools resolves each pool's credentials, then builds and probes the pools
// concurrently, so one slow backend costs one timeout, not one per pool. Findings stay
// grouped by pool, in file order.
func (r *run) checkPools(ctx context.Context, list []config.PoolConfig, bad map[int]bool) {
	results := make([][]Finding, len(list))
	probes := make([][]Finding, len(list))
	var wg sync.WaitGroup
	for i, p := range list {
		if bad[i] {
			continue
		}
		subject := "pool " + p.Name
		if env := p.Credentials.Env; env != "" {
			v := r.opts.Getenv(env)
			if v == "" {
				results[i] = append(results[i], Finding{LevelError, subject,
					fmt.Sprintf("credentials variable %s is not set or empty", env)})
				continue
			}
			r.secret(v)
			results[i] = append(results[i], Finding{LevelOK, subject,
				fmt.Sprintf("credentials variable %s is set", env)})
		}
		wg.Go(func() { probes[i] = r.probe(ctx, subject, p.StorePool()) })
	}
	wg.Wait()
	for i := range list {
		r.findings = append(r.findings, results[i]...)
		r.findings = append(r.findings, probes[i]...)
	}
}

// probe builds one pool's adapter and asks it for its capabilities and health. It
// runs concurrently with other probes and touches nothing of r but read-only options.
func (r *run) probe(ctx context.Context, subject string, p store.Pool) []Finding {
	fail := func(format string, args ...any) []Finding {
		return []Finding{{Level: LevelError, Subject: subject, Message: fmt.Sprintf(format, args...)}}
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	defer cancel()
	a, err := r.opts.Registry.Build(ctx, p, pools.Env{Getenv: r.opts.Getenv, Allowed: r.allowed})
	if err != nil {
		return fail("adapter %s cannot be built: %s", p.Adapter, api.Message(err))
	}
	caps, err := a.Capabilities(ctx)
	if err != nil {
		return fail("capabilities: %s", api.Message(err))
	}
	if err := a.Health(ctx); err != nil {
		return fail("health: %s", api.Message(err))
	}
	features := adapters.EffectiveFeatures(a, caps.Features)
	return []Finding{{Level: LevelOK, Subject: subject,
		Message: fmt.Sprintf("healthy (adapter %s; features: %s)", p.Adapter, strings.Join(features, ", "))}}
}
