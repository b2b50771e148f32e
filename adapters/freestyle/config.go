package freestyle

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/adapters/poolconfig"
)

// Defaults for the pool config keys.
const (
	DefaultAPIURL = "https://api.freestyle.sh"
	DefaultDomain = "style.dev"
	// DefaultPollInterval spaces the reads that wait for a VM to change state.
	DefaultPollInterval = time.Second
)

// Egress settings.
const (
	EgressNone   = "none"
	EgressPublic = "public"
)

// Config is a Freestyle pool's configuration.
type Config struct {
	// APIURL is the API root; DefaultAPIURL when empty.
	APIURL string
	// Snapshot is the snapshotId new VMs boot from when a request names no template;
	// empty means Freestyle's default image.
	Snapshot string
	// Egress is EgressNone (the default: a firewall that allows nothing out) or
	// EgressPublic (everything allowed).
	Egress string
	// Domain is where exposed ports get their hostnames; DefaultDomain when empty.
	Domain string
}

// ParseConfig reads the pool config keys apiURL, snapshot, egress and domain. Unknown
// keys and values of the wrong type are invalid_request naming the key.
func ParseConfig(cfg map[string]any) (Config, error) {
	r := poolconfig.Read(Kind, cfg)
	c := Config{
		APIURL:   strings.TrimSpace(r.URLOrDefault("apiURL", DefaultAPIURL)),
		Snapshot: strings.TrimSpace(r.String("snapshot", "")),
		Egress:   strings.TrimSpace(r.String("egress", EgressNone)),
		Domain:   strings.TrimSpace(r.String("domain", DefaultDomain)),
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	if c.Egress == "" {
		c.Egress = EgressNone
	}
	if c.Egress != EgressNone && c.Egress != EgressPublic {
		r.Check("egress", fmt.Errorf("want %q or %q, got %q", EgressNone, EgressPublic, c.Egress))
	}
	if strings.ContainsAny(c.Domain, "/:@ ") || strings.HasPrefix(c.Domain, ".") {
		r.Check("domain", fmt.Errorf("%q is not a domain name", c.Domain))
	}
	if err := r.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Option configures an Adapter.
type Option func(*options)

type options struct {
	http  *http.Client
	poll  time.Duration
	httpx []httpx.Option // tests lower limits with these
}

// WithHTTPClient replaces the HTTP client (tests pass the fake server's).
func WithHTTPClient(h *http.Client) Option { return func(o *options) { o.http = h } }

// WithPollInterval sets how often state changes are polled (DefaultPollInterval).
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.poll = d } }

// New builds an adapter calling Freestyle with apiKey. Config fields left empty take
// their defaults, as in ParseConfig.
func New(cfg Config, apiKey string, opts ...Option) (*Adapter, error) {
	if apiKey == "" {
		return nil, adapters.InvalidRequest("freestyle: an API key is required")
	}
	raw := map[string]any{"snapshot": cfg.Snapshot, "egress": cfg.Egress, "domain": cfg.Domain}
	if strings.TrimSpace(cfg.APIURL) != "" {
		// An empty URL in a Go caller's Config means the default; in a pool's config
		// it is refused, so it is left out here rather than passed on.
		raw["apiURL"] = cfg.APIURL
	}
	parsed, err := ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	o := options{poll: DefaultPollInterval}
	for _, opt := range opts {
		opt(&o)
	}
	if o.poll <= 0 {
		o.poll = DefaultPollInterval
	}
	hopts := []httpx.Option{httpx.WithBearer(apiKey)}
	if o.http != nil {
		hopts = append(hopts, httpx.WithHTTPClient(o.http))
	}
	hopts = append(hopts, o.httpx...)
	c, err := httpx.New(Kind, parsed.APIURL, hopts...)
	if err != nil {
		return nil, err
	}
	return &Adapter{cfg: parsed, c: c, poll: o.poll}, nil
}
