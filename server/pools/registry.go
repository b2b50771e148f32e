package pools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/daytona"
	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/adapters/freestyle"
	"github.com/different-ai/differently/adapters/local"
	"github.com/different-ai/differently/adapters/opensandbox"
	"github.com/different-ai/differently/adapters/poolconfig"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/netpolicy"
	"github.com/different-ai/differently/internal/redact"
	"github.com/different-ai/differently/server/store"
)

// Credentials carry a pool's secret from its environment variable to its factory. The
// secret is unexported and every way of printing a Credentials hides it, so passing one
// to a logger or a %v cannot leak it.
type Credentials struct {
	// Env names the variable the secret came from; "" when the pool has none.
	Env    string
	secret string
}

// NewCredentials is for callers that resolve secrets themselves (tests, custom builds).
func NewCredentials(env, secret string) Credentials { return Credentials{Env: env, secret: secret} }

// Secret returns the secret; "" when the pool has no credentials.
func (c Credentials) Secret() string { return c.secret }

func (c Credentials) String() string {
	if c.Env == "" {
		return "no credentials"
	}
	return "credentials from $" + c.Env
}

// GoString keeps %#v from printing the secret field.
func (c Credentials) GoString() string { return "pools.Credentials{" + c.String() + "}" }

// LogValue keeps slog from printing the secret field.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Factory builds the adapter of one pool. It must not do slow I/O: the manager probes
// the adapter afterwards, with a timeout. It may read only the pool's Adapter, Config
// and credentials: a change to any other field keeps the adapter already built
// (RebuildsAdapter).
type Factory func(ctx context.Context, p store.Pool, creds Credentials) (adapters.ExecutionAdapter, error)

type registration struct {
	factory Factory
	check   ConfigCheck
	devOnly bool
}

// Endpoint is a URL a pool's config names for the daemon to call, with the config key
// it is under.
type Endpoint struct {
	Key string
	URL string
}

// ConfigCheck reads a pool's config the way the kind's factory will, without building
// anything or doing I/O, and returns the endpoints it names. Its errors are
// invalid_request naming the key (poolconfig.KeyError).
type ConfigCheck func(cfg map[string]any) ([]Endpoint, error)

// Registry maps adapter kinds to factories. It is safe for concurrent use.
type Registry struct {
	dev   bool
	mu    sync.RWMutex
	kinds map[string]registration
	// endpoints holds the networks pool endpoints may be in; nil allows all.
	endpoints *netpolicy.Policy
}

// SetEndpointPolicy holds pools' endpoints to the operator's networks
// (config.Config.EndpointPolicy): CheckConfig refuses an endpoint whose host is or
// resolves to an address outside them, and the built-in kinds' HTTP clients refuse
// to connect to one. Set it before the first Build; nil allows all.
func (r *Registry) SetEndpointPolicy(p *netpolicy.Policy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endpoints = p
}

// httpClient is the client the built-in kinds call their backends with: one whose
// dials are held to the endpoint policy, or nil (each adapter's own default) when
// there is no policy. timeout 0 means none.
func (r *Registry) httpClient(timeout time.Duration) *http.Client {
	p := r.policy()
	if !p.Active() {
		return nil
	}
	return p.Client(timeout)
}

// NewRegistry returns an empty registry; dev allows dev-only kinds to be built.
func NewRegistry(dev bool) *Registry {
	return &Registry{dev: dev, kinds: map[string]registration{}}
}

// Register adds kind, replacing an earlier registration (a custom build may swap a
// built-in factory). A devOnly kind is listed by Kinds in every mode, so that refusing
// it outside dev can say why instead of calling it unknown; Build refuses it there.
func (r *Registry) Register(kind string, f Factory, devOnly bool) {
	if kind == "" || f == nil {
		panic("pools: Register needs a kind and a factory")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[kind] = registration{factory: f, devOnly: devOnly}
}

// SetConfigCheck gives kind the check CheckConfig runs; kind must be registered. A
// kind without one has its config checked only by its factory, when the pool is built.
func (r *Registry) SetConfigCheck(kind string, check ConfigCheck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.kinds[kind]
	if !ok {
		panic("pools: SetConfigCheck of unregistered kind " + kind)
	}
	reg.check = check
	r.kinds[kind] = reg
}

// CheckConfig reports what is wrong with a pool's config of kind before it is stored
// (the admin API, the config file, preflight): an unknown key, a value of the wrong
// type, a missing required key, an endpoint that is not an http or https URL. A
// config that passes may still fail to reach its backend, which the probes report.
// An unknown kind is not this method's to report; it answers nil.
func (r *Registry) CheckConfig(ctx context.Context, kind string, cfg map[string]any) error {
	r.mu.RLock()
	reg, ok := r.kinds[kind]
	r.mu.RUnlock()
	if !ok || reg.check == nil {
		return nil
	}
	endpoints, err := reg.check(cfg)
	if err != nil {
		return err
	}
	policy := r.policy()
	return checkEndpoints(kind, endpoints, func(host string) error { return policy.CheckHost(ctx, host) })
}

// policy is the endpoint policy SetEndpointPolicy set, or nil.
func (r *Registry) policy() *netpolicy.Policy {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.endpoints
}

// checkEndpoints runs check on the host of each endpoint and names the first refused
// one's key. An endpoint that does not parse is passed over: the kind's config check
// reports it.
func checkEndpoints(kind string, endpoints []Endpoint, check func(host string) error) error {
	for _, e := range endpoints {
		u, err := url.Parse(strings.TrimSpace(e.URL))
		if err != nil {
			continue
		}
		if err := check(u.Hostname()); err != nil {
			return poolconfig.KeyError(kind, e.Key, err)
		}
	}
	return nil
}

// Kinds returns the registered kinds, sorted: what config.ValidateOptions.KnownAdapters
// should be.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.kinds))
	for k := range r.kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// DevOnlyKinds returns the kinds registered as dev-only, sorted: the one list of
// them that config validation and the admin API refuse outside dev mode.
func (r *Registry) DevOnlyKinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for k, reg := range r.kinds {
		if reg.devOnly {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Dev reports whether the registry builds dev-only kinds.
func (r *Registry) Dev() bool { return r.dev }

// Has reports whether this build has an adapter of kind.
func (r *Registry) Has(kind string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.kinds[kind]
	return ok
}

// Env is where pools' credentials come from: the daemon's environment, as far as the
// operator's allowlist lets a pool name it.
type Env struct {
	// Getenv reads a variable; os.Getenv when nil.
	Getenv func(string) string
	// Allowed is the config file's poolCredentials.allowedEnv; the zero value is no
	// list, and api.CheckCredentialsEnv alone decides.
	Allowed api.EnvAllowlist
}

// Build resolves the pool's credentials from env and calls its kind's factory. Errors
// never contain the secret: a factory error quoting it has it replaced.
func (r *Registry) Build(ctx context.Context, p store.Pool, env Env) (adapters.ExecutionAdapter, error) {
	r.mu.RLock()
	reg, ok := r.kinds[p.Adapter]
	r.mu.RUnlock()
	if !ok {
		return nil, adapters.InvalidRequest("adapter kind %q is not in this build", p.Adapter)
	}
	if reg.devOnly && !r.dev {
		return nil, adapters.InvalidRequest("adapter %s is only allowed in development mode (--dev)", p.Adapter)
	}
	if err := r.checkLiteralEndpoints(reg, p); err != nil {
		return nil, err
	}
	creds, err := ResolveCredentials(p, env)
	if err != nil {
		return nil, err
	}
	a, err := reg.factory(ctx, p, creds)
	if err != nil {
		return nil, redactErr(err, creds.secret)
	}
	if a == nil {
		return nil, fmt.Errorf("adapter %s: factory returned no adapter", p.Adapter)
	}
	return a, nil
}

// checkLiteralEndpoints refuses a pool whose endpoint is written as an address
// outside the endpoint policy, or as a number that is not an address in canonical
// form, before its credential is resolved: a pool stored before the policy was set,
// or written to the store by hand. Names are not looked up here (Build does no slow
// I/O); the clients' dials refuse what they resolve to.
func (r *Registry) checkLiteralEndpoints(reg registration, p store.Pool) error {
	policy := r.policy()
	if !policy.Active() || reg.check == nil {
		return nil
	}
	endpoints, err := reg.check(p.Config)
	if err != nil {
		return nil // the factory reports it in its own words
	}
	return checkEndpoints(p.Adapter, endpoints, policy.CheckLiteral)
}

// ResolveCredentials reads the pool's credentials variable. A named variable that is
// unset or empty is an error naming the variable: a pool started without its key would
// only fail later, at every call, with the backend's less helpful words.
//
// The name is checked against the rule and the allowlist before anything is read: a
// pool stored before the rule existed or the list was tightened, or written to the
// store by hand, fails to build with the reason instead of receiving the secret.
func ResolveCredentials(p store.Pool, env Env) (Credentials, error) {
	if p.CredentialsEnv == "" {
		return Credentials{}, nil
	}
	if err := env.Allowed.Check(p.CredentialsEnv); err != nil {
		return Credentials{}, err
	}
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	secret := getenv(p.CredentialsEnv)
	if secret == "" {
		return Credentials{}, adapters.InvalidRequest("credentials variable %s is not set or empty", p.CredentialsEnv).
			WithDetail("env", p.CredentialsEnv)
	}
	return Credentials{Env: p.CredentialsEnv, secret: secret}, nil
}

// redactErr removes secret, in every form internal/redact knows, from err's message
// (and an *api.Error's details). The code of an *api.Error is kept so the caller can
// still act on it.
func redactErr(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	if e := api.AsError(err); e != nil {
		if out := adapters.NewRedactor(secret).Error(e); out != e {
			return out
		}
		return err
	}
	if msg := redact.String(err.Error(), secret); msg != err.Error() {
		return errors.New(msg)
	}
	return err
}

// DefaultRegistry registers the kinds of this build: devhost and fake (dev only),
// local, remote, and the provider adapters.
func DefaultRegistry(dev bool) *Registry {
	r := NewRegistry(dev)
	r.Register(devhost.Kind, func(_ context.Context, p store.Pool, _ Credentials) (adapters.ExecutionAdapter, error) {
		return devhost.FromConfig(p.Config)
	}, true)
	r.SetConfigCheck(devhost.Kind, func(cfg map[string]any) ([]Endpoint, error) {
		_, err := devhost.ParseConfig(cfg)
		return nil, err
	})
	// Not dev-only: each sandbox runs in namespaces of its own (see package local).
	r.Register(local.Kind, func(ctx context.Context, p store.Pool, _ Credentials) (adapters.ExecutionAdapter, error) {
		return local.FromConfig(ctx, p.Config)
	}, false)
	r.SetConfigCheck(local.Kind, func(cfg map[string]any) ([]Endpoint, error) {
		_, err := local.ParseConfig(cfg)
		return nil, err
	})
	r.Register(fake.Kind, func(_ context.Context, p store.Pool, _ Credentials) (adapters.ExecutionAdapter, error) {
		return fake.FromConfig(p.Config)
	}, true)
	r.SetConfigCheck(fake.Kind, func(cfg map[string]any) ([]Endpoint, error) {
		_, err := fake.ParseConfig(cfg)
		return nil, err
	})
	r.Register(RemoteKind, r.buildRemote, false)
	r.SetConfigCheck(RemoteKind, func(cfg map[string]any) ([]Endpoint, error) {
		c, err := parseRemote(cfg)
		return []Endpoint{{Key: "endpoint", URL: c.endpoint}}, err
	})
	// OpenSandbox servers may run without an API key; the key is sent when set.
	r.Register(opensandbox.Kind, func(_ context.Context, p store.Pool, creds Credentials) (adapters.ExecutionAdapter, error) {
		return opensandbox.FromConfig(p.Config, creds.secret, opensandbox.WithHTTPClient(r.httpClient(0)))
	}, false)
	r.SetConfigCheck(opensandbox.Kind, func(cfg map[string]any) ([]Endpoint, error) {
		c, err := opensandbox.ParseConfig(cfg)
		return []Endpoint{{Key: "apiURL", URL: c.APIURL}}, err
	})
	r.Register(daytona.Kind, func(_ context.Context, p store.Pool, creds Credentials) (adapters.ExecutionAdapter, error) {
		if err := needSecret(daytona.Kind, creds); err != nil {
			return nil, err
		}
		cfg, err := daytona.ParseConfig(p.Config)
		if err != nil {
			return nil, err
		}
		return daytona.New(cfg, creds.secret, daytona.WithHTTPClient(r.httpClient(0)))
	}, false)
	r.Register(freestyle.Kind, func(_ context.Context, p store.Pool, creds Credentials) (adapters.ExecutionAdapter, error) {
		if err := needSecret(freestyle.Kind, creds); err != nil {
			return nil, err
		}
		cfg, err := freestyle.ParseConfig(p.Config)
		if err != nil {
			return nil, err
		}
		return freestyle.New(cfg, creds.secret, freestyle.WithHTTPClient(r.httpClient(0)))
	}, false)
	r.SetConfigCheck(daytona.Kind, func(cfg map[string]any) ([]Endpoint, error) {
		c, err := daytona.ParseConfig(cfg)
		return []Endpoint{{Key: "apiURL", URL: c.APIURL}}, err
	})
	r.SetConfigCheck(freestyle.Kind, func(cfg map[string]any) ([]Endpoint, error) {
		c, err := freestyle.ParseConfig(cfg)
		return []Endpoint{{Key: "apiURL", URL: c.APIURL}}, err
	})
	return r
}

// needSecret refuses to build a provider adapter without its API key: every call
// would be rejected, and the pool would look like an outage instead of a mistake.
func needSecret(kind string, creds Credentials) error {
	if creds.secret == "" {
		return adapters.InvalidRequest("%s needs an API key: set credentials.env to the variable that holds it", kind)
	}
	return nil
}

// RemoteKind is the adapter kind of a pool served by an out-of-process plugin over the
// HTTP adapter protocol.
const RemoteKind = "remote"

// remoteConfig is a remote pool's config: endpoint (required) and timeoutSeconds
// (optional, the bound on one request, exec included; 0 keeps adapterhttp's default).
type remoteConfig struct {
	endpoint string
	seconds  int64
}

func parseRemote(cfg map[string]any) (remoteConfig, error) {
	const maxSeconds = 100 * 365 * 24 * 3600
	r := poolconfig.Read(RemoteKind, cfg)
	c := remoteConfig{endpoint: r.URL("endpoint", "")}
	if !r.Has("endpoint") {
		r.Check("endpoint", errors.New("required: the plugin's http or https URL"))
	}
	c.seconds = r.Int("timeoutSeconds", 0)
	// A number that is not a whole count of seconds in range gets this message; a
	// value that is no number at all keeps its type error.
	if _, notNumber := poolconfig.ToFloat(cfg["timeoutSeconds"]); r.Has("timeoutSeconds") &&
		(notNumber == nil || strings.HasPrefix(fmt.Sprint(cfg["timeoutSeconds"]), "-")) && (c.seconds < 1 || c.seconds > maxSeconds) {
		r.Check("timeoutSeconds", errors.New("must be a whole number of seconds above 0"))
	}
	if err := r.Err(); err != nil {
		return remoteConfig{}, err
	}
	return c, nil
}

// buildRemote builds a remote pool's client, which uses the pool's secret as the
// bearer token.
func (r *Registry) buildRemote(_ context.Context, p store.Pool, creds Credentials) (adapters.ExecutionAdapter, error) {
	c, err := parseRemote(p.Config)
	if err != nil {
		return nil, err
	}
	var opts []adapterhttp.Option
	if hc := r.httpClient(time.Duration(c.seconds) * time.Second); hc != nil {
		if c.seconds == 0 {
			hc.Timeout = adapterhttp.DefaultTimeout
		}
		opts = append(opts, adapterhttp.WithHTTPClient(hc))
	} else if c.seconds > 0 {
		opts = append(opts, adapterhttp.WithHTTPClient(&http.Client{
			Timeout: time.Duration(c.seconds) * time.Second,
			// As in adapterhttp's default client: a redirect would resend the token
			// somewhere the operator did not configure.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}))
	}
	return adapterhttp.NewClient(c.endpoint, creds.secret, opts...)
}
