package daytona

import (
	"fmt"
	"net/http"
	"time"

	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/adapters/poolconfig"
)

// DefaultAPIURL is Daytona's hosted API.
const DefaultAPIURL = "https://app.daytona.io/api"

// Sandbox classes. Daytona takes the class from the snapshot a sandbox is created
// from (create no longer accepts one); the pool's class says which it is, so that
// the adapter declares the features that class has.
const (
	ClassContainer = "container"
	ClassLinuxVM   = "linux-vm"
)

// Config is a Daytona pool's configuration.
type Config struct {
	// APIURL is the API root; DefaultAPIURL when empty.
	APIURL string
	// Target is the Daytona region sandboxes are created in; empty lets Daytona pick.
	Target string
	// Snapshot is the Daytona snapshot sandboxes are created from when the request
	// names no template; empty means Daytona's default snapshot.
	Snapshot string
	// Class is ClassContainer (the default) or ClassLinuxVM.
	Class string
}

// ParseConfig reads pool config keys: apiURL, target, snapshot and class. Unknown
// keys and values of the wrong type are invalid_request naming the key.
func ParseConfig(cfg map[string]any) (Config, error) {
	r := poolconfig.Read(Kind, cfg)
	c := Config{
		APIURL:   r.URLOrDefault("apiURL", DefaultAPIURL),
		Target:   r.String("target", ""),
		Snapshot: r.String("snapshot", ""),
		Class:    r.String("class", ClassContainer),
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	if c.Class == "" {
		c.Class = ClassContainer
	}
	if c.Class != ClassContainer && c.Class != ClassLinuxVM {
		r.Check("class", fmt.Errorf("want %q or %q, got %q", ClassContainer, ClassLinuxVM, c.Class))
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

// WithHTTPClient replaces the HTTP client used for the API and the toolbox.
func WithHTTPClient(h *http.Client) Option { return func(o *options) { o.http = h } }

// WithPollInterval sets how often state changes (start, stop, snapshots) are polled;
// one second by default. Tests shorten it.
func WithPollInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.poll = d
		}
	}
}
